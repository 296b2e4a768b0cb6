//go:build linux && cgo

package container

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/psych-runtime/psych/sandbox"
)

// unlabelled registers, in containerd, the test image under a new name
// with its config's io.psych.python label set to python (removed if ""),
// sharing its layers.
func unlabelled(t *testing.T, s *Sandbox, name, python string) {
	t.Helper()
	e := s.eng.(*containerdEngine)
	// Under a lease until the image holds the new blobs: a garbage
	// collection that another test's removal sets off in between must not
	// take the config before the manifest refers to it.
	ctx, done, err := e.c.WithLease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer done(context.Background())
	img, err := e.c.GetImage(ctx, testImage())
	if err != nil {
		t.Fatal(err)
	}
	cs := e.c.ContentStore()
	manifest, err := images.Manifest(ctx, cs, img.Target(), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := content.ReadBlob(ctx, cs, manifest.Config)
	if err != nil {
		t.Fatal(err)
	}
	var cfg ocispec.Image
	json.Unmarshal(raw, &cfg)
	if python == "" {
		delete(cfg.Config.Labels, ImageLabelPython)
	} else {
		cfg.Config.Labels[ImageLabelPython] = python
	}
	write := func(mt string, v any, labels map[string]string) ocispec.Descriptor {
		b, _ := json.Marshal(v)
		d := ocispec.Descriptor{MediaType: mt, Digest: digest.FromBytes(b), Size: int64(len(b))}
		if err := content.WriteBlob(ctx, cs, d.Digest.String(), bytes.NewReader(b), d, content.WithLabels(labels)); err != nil && !errdefs.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		return d
	}
	manifest.Config = write(ocispec.MediaTypeImageConfig, cfg, nil)
	// The manifest keeps its config and layers from containerd's collector.
	refs := map[string]string{"containerd.io/gc.ref.content.config": manifest.Config.Digest.String()}
	for i, l := range manifest.Layers {
		refs[fmt.Sprintf("containerd.io/gc.ref.content.l.%d", i)] = l.Digest.String()
	}
	target := write(ocispec.MediaTypeImageManifest, manifest, refs)
	is := e.c.ImageService()
	is.Delete(ctx, name)
	if _, err := is.Create(ctx, images.Image{Name: name, Target: target}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { is.Delete(context.Background(), name) })
}

// TestInterpreterChoice: the image's label, else ContainerPythonBin, else
// python3 on the image's PATH; an image without the interpreter is a
// configuration error at New.
func TestInterpreterChoice(t *testing.T) {
	s := engineOrSkip(t, Containerd)
	unlabelled(t, s, "localhost/psych-test-nolabel:1", "")
	// No label, nothing configured, no /usr/local/bin/python3: PATH's.
	p := newTestSandbox(t, Containerd, Config{Image: "localhost/psych-test-nolabel:1"})
	res, err := p.Run(context.Background(), sandbox.Request{Code: "import sys\nsys.executable"})
	if err != nil || res.Failure != nil || string(res.Value) != `"/usr/local/sbin/python3"` && string(res.Value) != `"/usr/bin/python3"` {
		t.Fatalf("python3 from the image's PATH: %v %+v", err, res)
	}
	// Configured but absent: refused at New.
	if _, err := New(Config{Engine: Containerd, Image: "localhost/psych-test-nolabel:1", ContainerPythonBin: "/opt/none/python3"}); !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "/opt/none/python3") {
		t.Fatalf("an interpreter the image lacks: %v, want ErrInvalidConfig naming it", err)
	}
	// A label that names nothing: refused at New too.
	unlabelled(t, s, "localhost/psych-test-badlabel:1", "/opt/none/python3")
	if _, err := New(Config{Engine: Containerd, Image: "localhost/psych-test-badlabel:1"}); !errors.Is(err, sandbox.ErrInvalidConfig) {
		t.Fatalf("a label naming no file: %v, want ErrInvalidConfig", err)
	}
}

// TestInterpreterMissingCLI: on a CLI engine, which cannot look inside the
// image at New, an interpreter the image lacks is a configuration error at
// Run, never a host fault.
func TestInterpreterMissingCLI(t *testing.T) {
	engineOrSkip(t, Docker)
	const name = "localhost/psych-test-badlabel:1"
	out, err := exec.Command("docker", "create", "--name", "psych-test-badlabel", testImage()).CombinedOutput()
	if err != nil {
		t.Fatalf("docker create: %v: %s", err, out)
	}
	defer exec.Command("docker", "rm", "-f", "psych-test-badlabel").Run()
	if out, err := exec.Command("docker", "commit", "--change", "LABEL "+ImageLabelPython+"=/opt/none/python3", "psych-test-badlabel", name).CombinedOutput(); err != nil {
		t.Fatalf("docker commit: %v: %s", err, out)
	}
	defer exec.Command("docker", "rmi", "-f", name).Run()
	s := newTestSandbox(t, Docker, Config{Image: name})
	res, err := s.Run(context.Background(), sandbox.Request{Code: "1"})
	if !errors.Is(err, sandbox.ErrInvalidConfig) || res != nil || !strings.Contains(err.Error(), "/opt/none/python3") {
		t.Fatalf("Run with an interpreter the image lacks: %v, %+v; want ErrInvalidConfig naming it", err, res)
	}
}

// TestOldBaseRemoved: a base snapshot an earlier layout made (baseVersion)
// for the same image is removed once New makes the current one, so a new
// psych leaves no snapshot of the old one behind.
func TestOldBaseRemoved(t *testing.T) {
	s := newTestSandbox(t, Containerd, Config{})
	e := s.eng.(*containerdEngine)
	ctx, done, err := e.c.WithLease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer done(context.Background())
	sn := e.c.SnapshotService(snapshotter)
	base, err := sn.Stat(ctx, e.base)
	if err != nil {
		t.Fatal(err)
	}
	chain := strings.TrimPrefix(e.base, "psych-base-"+baseVersion+"-")
	old := "psych-base-0-" + chain
	sn.Remove(ctx, old)
	key := old + "-prepare"
	sn.Remove(ctx, key)
	if _, err := sn.Prepare(ctx, key, base.Parent); err != nil {
		t.Fatal(err)
	}
	if err := sn.Commit(ctx, old, key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sn.Remove(context.Background(), old) })
	s.settle()
	if err := sn.Remove(ctx, e.base); err != nil {
		t.Fatalf("remove the current base: %v", err)
	}
	newTestSandbox(t, Containerd, Config{})
	if _, err := sn.Stat(ctx, e.base); err != nil {
		t.Fatalf("New made no base: %v", err)
	}
	if _, err := sn.Stat(ctx, old); !errdefs.IsNotFound(err) {
		t.Errorf("the old layout's base %s: %v; want it removed", old, err)
	}
}

// TestConcurrentNew: Sandboxes made at once in one process on containerd
// all open: each New's look into the base snapshot (and the making of a
// missing one) is its own, never another New's of the same process.
func TestConcurrentNew(t *testing.T) {
	engineOrSkip(t, Containerd)
	const n = 6
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			<-start
			s, err := New(Config{Engine: Containerd, Image: testImage()})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	close(start)
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Errorf("New beside %d others: %v", n-1, err)
		}
	}
}

//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/internal/ociarchive"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/seccomp"
)

// baseArchive is psych's own image as `make image` left it in its cache
// (PSYCH_IMAGE_CACHE, else /var/cache/psych/image): the hostile images are
// derived from it, never pulled. Where it is missing the test skips, but
// in CI (which makes the image first) it fails.
func baseArchive(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("PSYCH_IMAGE_CACHE")
	if cache == "" {
		cache = "/var/cache/psych/image"
	}
	found, _ := filepath.Glob(filepath.Join(cache, "*", "image.tar"))
	if len(found) == 0 {
		if testutil.InCI() {
			t.Fatalf("no image archive under %s: make image", cache)
		}
		testutil.Unavailable(t, "no image archive under %s (make image makes it)", cache)
	}
	return found[0]
}

// hostile is a hostile image derived from psych's own: a test builds it
// (its archive is removed when that test ends), then imports it into each
// engine.
type hostile struct {
	ref   string
	d     ociarchive.Derivation
	files map[string]string // path (in the image) -> content, in the new layer

	once    sync.Once
	archive string
	err     error
}

// build writes the image's archive, once; call it from the test, not from
// a subtest.
func (h *hostile) build(t *testing.T) string {
	t.Helper()
	base := baseArchive(t)
	h.once.Do(func() {
		dir, err := os.MkdirTemp("/var/tmp", "psych-hostile-")
		if err != nil {
			h.err = err
			return
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		root := filepath.Join(dir, "root")
		if err := os.Mkdir(root, 0o755); err != nil {
			h.err = err
			return
		}
		stamp := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the same digests run after run
		for p, content := range h.files {
			full := filepath.Join(root, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				h.err = err
				return
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				h.err = err
				return
			}
		}
		filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, stamp, stamp) })
		h.archive = filepath.Join(dir, "image.tar")
		f, err := os.Create(h.archive)
		if err != nil {
			h.err = err
			return
		}
		d := h.d
		d.Ref, d.Created = h.ref, stamp
		if _, h.err = ociarchive.Derive(f, base, root, dir, d); h.err == nil {
			h.err = f.Close()
		}
	})
	if h.err != nil {
		t.Fatalf("build %s: %v", h.ref, h.err)
	}
	return h.archive
}

// load imports the image into engine's store, as psych's defaults name
// it, and removes it when the test ends.
func (h *hostile) load(t *testing.T, engine Engine) {
	t.Helper()
	archive := h.build(t)
	var load, rm []string
	switch engine {
	case Containerd:
		load = []string{"ctr", "-a", DefaultContainerdAddress, "-n", DefaultNamespace, "images", "import", archive}
		rm = []string{"ctr", "-a", DefaultContainerdAddress, "-n", DefaultNamespace, "images", "rm", h.ref}
	case Podman:
		g := []string{"podman", "--root", DefaultPodmanRoot, "--runroot", DefaultPodmanRunroot, "--cgroup-manager", "cgroupfs", "--events-backend", "file"}
		load = append(append([]string{}, g...), "load", "-q", "-i", archive)
		rm = append(append([]string{}, g...), "rmi", "-f", h.ref)
	case Docker:
		load = []string{"docker", "-H", DefaultDockerHost, "load", "-q", "-i", archive}
		rm = []string{"docker", "-H", DefaultDockerHost, "rmi", "-f", h.ref}
	}
	if out, err := exec.Command(load[0], load[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(load, " "), err, out)
	}
	t.Cleanup(func() { exec.Command(rm[0], rm[1:]...).Run() })
}

// open opens a Sandbox of engine on the image (engineOrSkip first: an
// engine this host lacks skips, as everywhere in this package).
func (h *hostile) open(t *testing.T, engine Engine) *Sandbox {
	t.Helper()
	engineOrSkip(t, engine)
	h.load(t, engine)
	s := newTestSandbox(t, engine, Config{Image: h.ref})
	removeBase(t, s)
	return s
}

// removeBase removes, when the test ends, the base snapshot a containerd
// Sandbox made for its image (psych keeps it for the next New), once its
// runs are removed, before it is closed.
func removeBase(t *testing.T, s *Sandbox) {
	if ce, ok := s.eng.(*containerdEngine); ok {
		t.Cleanup(func() {
			s.settle()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ce.c.SnapshotService(snapshotter).Remove(ctx, ce.base)
		})
	}
}

const healthMark = "/tmp/psych-healthcheck-ran"

// hostileEnv sets what the loader and psych's init would obey and puts a
// preload list in /etc.
func hostileEnv() *hostile {
	return &hostile{
		ref: "localhost/psych-hostile-env:1",
		d: ociarchive.Derivation{
			Env: []string{"LD_PRELOAD=/psych-hostile-env.so", "GLIBC_TUNABLES=glibc.malloc.tcache_count=0",
				"_PSYCH_NSEXEC_DIR=/psych-hostile-dir", "PSYCH_HOSTILE=1"},
		},
		files: map[string]string{"etc/ld.so.preload": "/psych-hostile-preload.so\n"},
	}
}

// TestImageReachesNoInit: an image's ENV (LD_PRELOAD, GLIBC_TUNABLES,
// psych's own _PSYCH_NSEXEC_DIR) and its /etc/ld.so.preload reach neither
// the loader that starts psych's init nor the interpreter, on every engine:
// the run works (a _PSYCH_NSEXEC_DIR obeyed would send the init elsewhere),
// no loader complains about the objects named (they do not exist), and the
// floor's check of the init's start environment passes.
func TestImageReachesNoInit(t *testing.T) {
	img := hostileEnv()
	img.build(t)
	forEachEngine(t, func(t *testing.T, engine Engine) {
		s := img.open(t, engine)
		code := "import os\n[os.environ.get('LD_PRELOAD'), os.environ.get('PSYCH_HOSTILE'), open('/etc/ld.so.preload').read()]"
		res, err := s.Run(context.Background(), sandbox.Request{Code: code})
		if err != nil {
			t.Fatalf("run on the hostile image: %v", err)
		}
		if res.Failure != nil || string(res.Value) != `[null,null,""]` {
			t.Errorf("value %s, failure %+v: want no image variable, an empty preload list", res.Value, res.Failure)
		}
		if strings.Contains(res.Stderr, "psych-hostile") || strings.Contains(res.Stderr, "ld.so") {
			t.Errorf("a loader read the image's preload: stderr %q", res.Stderr)
		}
	})
}

// TestImageHealthcheckNeverRuns: docker runs an image's HEALTHCHECK inside
// the container, beside psych's init and outside it; no engine may.
func TestImageHealthcheckNeverRuns(t *testing.T) {
	img := &hostile{ref: "localhost/psych-hostile-health:1", d: ociarchive.Derivation{
		Healthcheck: []string{"CMD", "/usr/bin/touch", healthMark}, HealthInterval: 500 * time.Millisecond}}
	img.build(t)
	forEachEngine(t, func(t *testing.T, engine Engine) {
		s := img.open(t, engine)
		code := "import os, time\nfor _ in range(40):\n    if os.path.exists('" + healthMark + "'): break\n    time.sleep(0.1)\nos.path.exists('" + healthMark + "')"
		res, err := s.Run(context.Background(), sandbox.Request{Code: code})
		if err != nil {
			t.Fatal(err)
		}
		if res.Failure != nil || string(res.Value) != "false" {
			t.Errorf("the image's health check ran in the run's container: %s %+v", res.Value, res.Failure)
		}
	})
}

// TestInitEnvChecked: the floor's check of the init's start environment
// refuses a variable neither psych nor the engine set, and takes psych's
// own and the engine's.
func TestInitEnvChecked(t *testing.T) {
	want := []string{"_PSYCH_NSEXEC=container"}
	for env, ok := range map[string]bool{
		"_PSYCH_NSEXEC=container PATH=/bin HOSTNAME=x HOME=/":     true,
		"_PSYCH_NSEXEC=container container=podman":                true,
		"_PSYCH_NSEXEC=container LD_PRELOAD=/x.so":                false,
		"_PSYCH_NSEXEC=container _PSYCH_NSEXEC_DIR=/x":            false,
		"_PSYCH_NSEXEC=container GLIBC_TUNABLES=glibc.malloc.x=1": false,
		"_PSYCH_NSEXEC=other":                                     false,
	} {
		cmd := exec.Command("/bin/sleep", "10")
		cmd.Env = strings.Fields(env)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Until the execve is done, the child's environment is this test's.
		testutil.WaitFor(t, 10*time.Second, "sleep's execve", func() bool {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
			return string(b) == "/bin/sleep\x0010\x00"
		})
		err := checkInitEnv(cmd.Process.Pid, want)
		cmd.Process.Kill()
		cmd.Wait()
		if (err == nil) != ok {
			t.Errorf("start environment %q: %v, want accepted %v", env, err, ok)
		}
	}
}

// TestImageVolumes: an image VOLUME gives no run a writable directory: docker
// refuses such an image at New (it would make one per run, outside
// TmpBytes, that rm -f leaves behind), podman ignores it, containerd never
// makes it; and no engine is left holding a volume.
func TestImageVolumes(t *testing.T) {
	img := &hostile{ref: "localhost/psych-hostile-volume:1", d: ociarchive.Derivation{Volumes: []string{"/psych-volume"}}}
	img.build(t)
	forEachEngine(t, func(t *testing.T, engine Engine) {
		engineOrSkip(t, engine)
		img.load(t, engine)
		volumes := func() string {
			var cmd *exec.Cmd
			switch engine {
			case Podman:
				cmd = exec.Command("podman", "--root", DefaultPodmanRoot, "--runroot", DefaultPodmanRunroot, "--cgroup-manager", "cgroupfs", "--events-backend", "file", "volume", "ls", "-q")
			case Docker:
				cmd = exec.Command("docker", "-H", DefaultDockerHost, "volume", "ls", "-q")
			default:
				return ""
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("list volumes: %v", err)
			}
			return string(out)
		}
		before := volumes()
		if engine == Docker {
			_, err := New(Config{Engine: engine, Image: img.ref})
			if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "VOLUME /psych-volume") {
				t.Fatalf("New on docker with an image VOLUME: %v, want ErrInvalidConfig naming it", err)
			}
			return
		}
		s := newTestSandbox(t, engine, Config{Image: img.ref})
		removeBase(t, s)
		res, err := s.Run(context.Background(), sandbox.Request{Code: "import os\ntry:\n    open('/psych-volume/x', 'w').write('x')\n    r = 'written'\nexcept OSError as e:\n    r = type(e).__name__\nr"})
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Value) == `"written"` || res.Failure != nil {
			t.Errorf("the image's VOLUME: %s %+v, want no writable directory", res.Value, res.Failure)
		}
		s.settle()
		if after := volumes(); after != before {
			t.Errorf("volumes before the run %q, after %q", before, after)
		}
	})
}

// TestFloorChecksPsychFilter: a seccomp filter alone does not pass the
// floor: an init that loaded another filter than psych's (here by a test
// hook; an image's preload could make it skip its own) is refused.
func TestFloorChecksPsychFilter(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine Engine) {
		s := engineOrSkip(t, engine)
		pol := seccomp.Default()
		if !s.eng.userNS() {
			pol.ConfineIDs(4242, 4242) // not the run's: another program
		}
		other, err := pol.Compile()
		if err != nil {
			t.Fatal(err)
		}
		if other.Digest() == s.filter.Digest() {
			t.Fatal("the other filter is psych's")
		}
		s.hooks.initFilter = other
		res, err := s.Run(context.Background(), sandbox.Request{Code: "1"})
		if !errors.Is(err, sandbox.ErrRefused) || res != nil || !strings.Contains(err.Error(), "seccomp filter") {
			t.Fatalf("an init with another filter: %v, %+v; want ErrRefused naming the filter", err, res)
		}
		s.hooks.initFilter = nil
		if res, err := s.Run(context.Background(), sandbox.Request{Code: "1"}); err != nil || string(res.Value) != "1" {
			t.Fatalf("psych's own filter: %v, %+v", err, res)
		}
	})
}

// TestExtraArgsKeepPsychLabels: ExtraRunArgs may not set psych's labels
// (the owner label reaping trusts) nor end the engine's flags with a word
// that is none (psych's own flags would become the command's arguments).
func TestExtraArgsKeepPsychLabels(t *testing.T) {
	for _, args := range [][]string{
		{"--label", "io.psych.owner=1@1"},
		{"--label=io.psych.owner=1@1"},
		{"--label", "IO.PSYCH.run=x"},
		{"--annotation=io.psych.owner=1@1"},
		{"--cpus=1", "localhost/other-image"},
		{"--cpus"},
	} {
		err := checkExtraArgs(args)
		if !errors.Is(err, sandbox.ErrInvalidConfig) {
			t.Errorf("ExtraRunArgs %q: %v, want ErrInvalidConfig", args, err)
		}
	}
	for _, args := range [][]string{{"--label", "team=data"}, {"--label=a=b", "--cpus", "1"}, {"--annotation", "x=y"}} {
		if err := checkExtraArgs(args); err != nil {
			t.Errorf("ExtraRunArgs %q: %v", args, err)
		}
	}
	for _, engine := range []Engine{Podman, Docker} {
		engineOrSkip(t, engine)
		_, err := New(Config{Engine: engine, Image: testImage(), ExtraRunArgs: []string{"--label", ownerLabel + "=1@1"}})
		if !errors.Is(err, sandbox.ErrInvalidConfig) || !strings.Contains(err.Error(), "psych's own") {
			t.Errorf("%s with ExtraRunArgs setting %s: %v, want ErrInvalidConfig saying it is psych's", engine, ownerLabel, err)
		}
	}
}

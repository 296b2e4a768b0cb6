package ociarchive

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
)

func TestDerive(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	root, extra, dir := t.TempDir(), t.TempDir(), t.TempDir()
	must(os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/bin/python3"), []byte("#!python"), 0o755))
	must(os.MkdirAll(filepath.Join(extra, "etc"), 0o755))
	must(os.WriteFile(filepath.Join(extra, "etc/ld.so.preload"), []byte("/x.so\n"), 0o644))
	base := filepath.Join(dir, "base.tar")
	f, err := os.Create(base)
	must(err)
	bimg, err := Write(f, root, dir, Options{Ref: "localhost/base:1", Env: []string{"PATH=/usr/bin", "A=1"}, Labels: map[string]string{"io.psych.python": "/usr/bin/python3"}})
	must(err)
	must(f.Close())

	out := filepath.Join(dir, "derived.tar")
	f, err = os.Create(out)
	must(err)
	img, err := Derive(f, base, extra, dir, Derivation{Ref: "localhost/derived:1", Env: []string{"A=2", "LD_PRELOAD=/y.so"},
		Volumes: []string{"/data"}, Healthcheck: []string{"CMD", "/bin/true"}, HealthInterval: time.Second})
	must(err)
	must(f.Close())

	files := readArchive(t, out)
	man := files.manifest(t, img.Manifest, "localhost/derived:1")
	if len(man.Layers) != 2 || man.Layers[0].Digest != bimg.Layer || man.Layers[1].Digest != img.Layer {
		t.Fatalf("layers %+v, want the base's then the new one", man.Layers)
	}
	files.blob(t, bimg.Layer)
	files.blob(t, img.Layer)
	var cfg derivedImage
	must(json.Unmarshal(files.blob(t, man.Config.Digest), &cfg))
	c := cfg.Config
	if !slices.Equal(c.Env, []string{"PATH=/usr/bin", "A=2", "LD_PRELOAD=/y.so"}) || c.Labels["io.psych.python"] != "/usr/bin/python3" {
		t.Errorf("env %q labels %v", c.Env, c.Labels)
	}
	if _, ok := c.Volumes["/data"]; !ok || c.Healthcheck == nil || !slices.Equal(c.Healthcheck.Test, []string{"CMD", "/bin/true"}) || c.Healthcheck.Interval != time.Second {
		t.Errorf("volumes %v healthcheck %+v", c.Volumes, c.Healthcheck)
	}
	if !slices.Equal(cfg.RootFS.DiffIDs, []digest.Digest{bimg.DiffID, img.DiffID}) {
		t.Errorf("diff_ids %v", cfg.RootFS.DiffIDs)
	}
	var docker []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	must(json.Unmarshal(files["manifest.json"], &docker))
	if len(docker) != 1 || docker[0].Config != blobPath(img.Config) || !slices.Equal(docker[0].Layers, []string{blobPath(bimg.Layer), blobPath(img.Layer)}) {
		t.Errorf("docker manifest %s", files["manifest.json"])
	}

	// Thin: the same image, without the base's layer in the archive.
	thin := filepath.Join(dir, "thin.tar")
	f, err = os.Create(thin)
	must(err)
	timg, err := Derive(f, base, extra, dir, Derivation{Ref: "localhost/derived:1", Env: []string{"A=2", "LD_PRELOAD=/y.so"},
		Volumes: []string{"/data"}, Healthcheck: []string{"CMD", "/bin/true"}, HealthInterval: time.Second, Created: *cfg.Created, Thin: true})
	must(err)
	must(f.Close())
	if timg != img {
		t.Errorf("thin image %+v, want the whole one's %+v", timg, img)
	}
	thinFiles := readArchive(t, thin)
	for name, b := range files {
		if _, ok := thinFiles[name]; !ok && name != blobPath(bimg.Layer) {
			t.Errorf("the thin archive lacks %s", name)
		} else if ok && string(thinFiles[name]) != string(b) {
			t.Errorf("the thin archive's %s differs from the whole one's", name)
		}
	}
	if _, ok := thinFiles[blobPath(bimg.Layer)]; ok || len(thinFiles) != len(files)-1 {
		t.Errorf("the thin archive holds %d files, the base's layer among them %v; want all but it", len(thinFiles), ok)
	}

	if _, err := Derive(io.Discard, filepath.Join(dir, "nonexistent.tar"), extra, dir, Derivation{Ref: "x"}); err == nil {
		t.Error("a missing base: no error")
	}
	if _, err := Derive(io.Discard, base, extra, dir, Derivation{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no ref: %v", err)
	}
}

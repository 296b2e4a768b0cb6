package ociarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestWrite(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/bin/python3"), []byte("#!python"), 0o755))
	must(os.Link(filepath.Join(root, "usr/bin/python3"), filepath.Join(root, "usr/bin/python3.11")))
	must(os.Symlink("usr/bin", filepath.Join(root, "bin")))
	must(os.WriteFile(filepath.Join(root, "usr/bin/su"), []byte("x"), 0o755))
	must(os.Chmod(filepath.Join(root, "usr/bin/su"), 0o4755))
	must(os.MkdirAll(filepath.Join(root, "dev/pts"), 0o755))
	must(os.WriteFile(filepath.Join(root, "dev/stray"), []byte("x"), 0o644))

	out := filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(out)
	must(err)
	img, err := Write(f, root, t.TempDir(), Options{Ref: "localhost/test:1", Labels: map[string]string{"io.psych.python": "/usr/bin/python3"}, Empty: []string{"dev"}})
	if err != nil {
		t.Fatal(err)
	}
	must(f.Close())
	files := readArchive(t, out)
	man := files.manifest(t, img.Manifest, "localhost/test:1")
	var cfg v1.Image
	must(json.Unmarshal(files.blob(t, man.Config.Digest), &cfg))
	if cfg.Config.Labels["io.psych.python"] != "/usr/bin/python3" || cfg.OS != "linux" {
		t.Errorf("config %+v", cfg)
	}
	var docker []struct {
		Config string
		Layers []string
	}
	must(json.Unmarshal(files["manifest.json"], &docker))
	if len(docker) != 1 || files[docker[0].Config] == nil || files[docker[0].Layers[0]] == nil {
		t.Fatalf("docker manifest %s names missing blobs", files["manifest.json"])
	}
	zr, err := gzip.NewReader(bytes.NewReader(files.blob(t, man.Layers[0].Digest)))
	must(err)
	raw, err := io.ReadAll(zr)
	must(err)
	if digest.FromBytes(raw) != cfg.RootFS.DiffIDs[0] {
		t.Fatal("diff_id is not the uncompressed layer's digest")
	}
	entries := map[string]*tar.Header{}
	lr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		entries[h.Name] = h
	}
	for name, check := range map[string]func(*tar.Header) bool{
		"usr/bin/python3":    func(h *tar.Header) bool { return h.Typeflag == tar.TypeReg && h.Mode&0o777 == 0o755 },
		"usr/bin/python3.11": func(h *tar.Header) bool { return h.Typeflag == tar.TypeLink && h.Linkname == "usr/bin/python3" },
		"bin":                func(h *tar.Header) bool { return h.Typeflag == tar.TypeSymlink && h.Linkname == "usr/bin" },
		"usr/bin/su":         func(h *tar.Header) bool { return h.Mode&0o6000 == 0 },
		"dev/":               func(h *tar.Header) bool { return h.Typeflag == tar.TypeDir },
	} {
		if h := entries[name]; h == nil || !check(h) {
			t.Errorf("layer entry %s: %+v", name, h)
		}
	}
	for _, gone := range []string{"dev/stray", "dev/pts/"} {
		if entries[gone] != nil {
			t.Errorf("layer holds %s, under an emptied directory", gone)
		}
	}
	if _, err := Write(io.Discard, root, "", Options{Ref: ""}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no ref: %v", err)
	}
}

// archived is an image archive's regular files by name, read back.
type archived map[string][]byte

func readArchive(t *testing.T, path string) archived {
	t.Helper()
	files := archived{}
	err := eachEntry(path, func(h *tar.Header, r io.Reader) error {
		b, err := io.ReadAll(r)
		files[h.Name] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// blob is the blob d, failing t unless it is there under its digest.
func (a archived) blob(t *testing.T, d digest.Digest) []byte {
	t.Helper()
	b, ok := a[blobPath(d)]
	if !ok || digest.FromBytes(b) != d {
		t.Fatalf("blob %s missing or wrong", d)
	}
	return b
}

// manifest is the one manifest of the index, failing t unless it is want,
// named ref.
func (a archived) manifest(t *testing.T, want digest.Digest, ref string) v1.Manifest {
	t.Helper()
	var index v1.Index
	if err := json.Unmarshal(a["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 || index.Manifests[0].Digest != want || index.Manifests[0].Annotations["io.containerd.image.name"] != ref {
		t.Fatalf("index %s", a["index.json"])
	}
	var man v1.Manifest
	if err := json.Unmarshal(a.blob(t, want), &man); err != nil {
		t.Fatal(err)
	}
	return man
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no room") }

// TestStagedLayerRemoved: the layer staged under tmpDir is gone once Write
// or Derive returns, whether it succeeded, the archive's writer failed, or
// the staging itself did.
func TestStagedLayerRemoved(t *testing.T) {
	root, tmp := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	left := func(what string) {
		t.Helper()
		if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
			t.Errorf("%s: %d entries left in tmpDir (%v)", what, len(ents), err)
		}
	}
	o := Options{Ref: "localhost/staged:1"}
	base := filepath.Join(t.TempDir(), "base.tar")
	f, err := os.Create(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(f, root, tmp, o); err != nil {
		t.Fatal(err)
	}
	f.Close()
	left("Write")
	if _, err := Write(failWriter{}, root, tmp, o); err == nil {
		t.Error("Write to a failing writer succeeded")
	}
	left("Write to a failing writer")
	if _, err := Derive(failWriter{}, base, root, tmp, Derivation{Ref: "localhost/derived:1"}); err == nil {
		t.Error("Derive to a failing writer succeeded")
	}
	left("Derive to a failing writer")
	if _, err := stageLayer(filepath.Join(root, "missing"), tmp, nil); err == nil {
		t.Error("staging a missing root succeeded")
	}
	left("staging a missing root")
}

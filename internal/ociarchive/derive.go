package ociarchive

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Derivation describes an image made from another's archive: its layers,
// one more on top, and its config with these changes.
type Derivation struct {
	// Ref is the new image's name.
	Ref string
	// Env entries (K=V) replace the base's of the same name, or are added.
	Env []string
	// Labels are added to the base's.
	Labels map[string]string
	// Volumes are added to the base's (VOLUME).
	Volumes []string
	// Healthcheck is docker's HEALTHCHECK test ("CMD", then the argv),
	// run every HealthInterval (zero: docker's default).
	Healthcheck    []string
	HealthInterval time.Duration
	// Created is the new image's creation time. Zero: now.
	Created time.Time
	// Thin leaves the base's layers out of the archive: its manifests
	// still name them, so only an engine that already holds the base
	// image (the same layers) can import it, reading kilobytes instead of
	// the base again. False: the archive is whole.
	Thin bool
}

// dockerHealth is docker's HEALTHCHECK, an extension of the OCI config.
type dockerHealth struct {
	Test     []string      `json:",omitempty"`
	Interval time.Duration `json:",omitempty"`
}

type derivedConfig struct {
	v1.ImageConfig
	Healthcheck *dockerHealth `json:",omitempty"`
}

type derivedImage struct {
	v1.Image
	Config derivedConfig `json:"config"`
}

// Derive writes to w the archive of an image made from the archive at base
// (one Write made, or any OCI layout of one manifest): the base's layers,
// then root's tree as one more layer (Options.Empty as Write's: none here),
// with d's changes to the config. The base's layers are copied, not
// recompressed (or left out, with d.Thin); the new layer is staged under
// tmpDir.
func Derive(w io.Writer, base, root, tmpDir string, d Derivation) (Image, error) {
	var img Image
	if d.Ref == "" || strings.ContainsAny(d.Ref, " \t\n") {
		return img, fmt.Errorf("image ref %q: %w", d.Ref, ErrInvalid)
	}
	if d.Created.IsZero() {
		d.Created = time.Now().UTC()
	}
	small := map[string][]byte{} // the archive's JSON files and small blobs
	err := eachEntry(base, func(h *tar.Header, r io.Reader) error {
		if h.Size < 1<<20 {
			b, err := io.ReadAll(r)
			small[h.Name] = b
			return err
		}
		return nil
	})
	if err != nil {
		return img, err
	}
	var index v1.Index
	if err := json.Unmarshal(small["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return img, fmt.Errorf("base %s: want an index of one manifest (%v): %w", base, err, ErrInvalid)
	}
	var man v1.Manifest
	if err := json.Unmarshal(small[blobPath(index.Manifests[0].Digest)], &man); err != nil {
		return img, fmt.Errorf("base %s: manifest: %v: %w", base, err, ErrInvalid)
	}
	var cfg derivedImage
	if err := json.Unmarshal(small[blobPath(man.Config.Digest)], &cfg); err != nil {
		return img, fmt.Errorf("base %s: config: %v: %w", base, err, ErrInvalid)
	}

	layer, err := os.CreateTemp(tmpDir, "psych-layer-*.tar.gz")
	if err != nil {
		return img, fmt.Errorf("stage layer: %w", err)
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	compressed, uncompressed := sha256.New(), sha256.New()
	zw, _ := gzip.NewWriterLevel(io.MultiWriter(layer, compressed), gzip.BestSpeed)
	if err := writeTree(io.MultiWriter(zw, uncompressed), root, nil); err != nil {
		return img, err
	}
	if err := zw.Close(); err != nil {
		return img, fmt.Errorf("compress layer: %w", err)
	}
	layerSize, err := layer.Seek(0, io.SeekCurrent)
	if err != nil {
		return img, err
	}
	img.Layer, img.DiffID = sum(compressed), sum(uncompressed)

	c := &cfg.Config
	for _, kv := range d.Env {
		k, _, _ := strings.Cut(kv, "=")
		c.Env = slices.DeleteFunc(c.Env, func(e string) bool { return strings.HasPrefix(e, k+"=") })
		c.Env = append(c.Env, kv)
	}
	if len(d.Labels) > 0 && c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range d.Labels {
		c.Labels[k] = v
	}
	if len(d.Volumes) > 0 && c.Volumes == nil {
		c.Volumes = map[string]struct{}{}
	}
	for _, v := range d.Volumes {
		c.Volumes[v] = struct{}{}
	}
	if len(d.Healthcheck) > 0 {
		c.Healthcheck = &dockerHealth{Test: d.Healthcheck, Interval: d.HealthInterval}
	}
	cfg.Created = &d.Created
	cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, img.DiffID)
	cfg.History = append(cfg.History, v1.History{Created: &d.Created, CreatedBy: "psych ociarchive derive"})
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return img, err
	}
	img.Config = digest.FromBytes(cfgJSON)
	layers := append(slices.Clone(man.Layers), v1.Descriptor{MediaType: v1.MediaTypeImageLayerGzip, Digest: img.Layer, Size: layerSize})
	newMan := v1.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageManifest,
		Config:    v1.Descriptor{MediaType: v1.MediaTypeImageConfig, Digest: img.Config, Size: int64(len(cfgJSON))},
		Layers:    layers,
	}
	manJSON, err := json.Marshal(newMan)
	if err != nil {
		return img, err
	}
	img.Manifest = digest.FromBytes(manJSON)
	desc := index.Manifests[0]
	desc.Digest, desc.Size = img.Manifest, int64(len(manJSON))
	desc.Annotations = map[string]string{"io.containerd.image.name": d.Ref, v1.AnnotationRefName: d.Ref}
	index.Manifests = []v1.Descriptor{desc}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return img, err
	}
	var layerPaths []string
	for _, l := range layers {
		layerPaths = append(layerPaths, blobPath(l.Digest))
	}
	dockerJSON, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{blobPath(img.Config), []string{d.Ref}, layerPaths}})
	if err != nil {
		return img, err
	}

	tw := tar.NewWriter(w)
	put := func(name string, size int64, r io.Reader) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: d.Created}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := io.CopyN(tw, r, size)
		return err
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: d.Created}); err != nil {
			return img, err
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{v1.ImageLayoutFile, []byte(`{"imageLayoutVersion":"` + v1.ImageLayoutVersion + `"}`)},
		{"index.json", indexJSON},
		{"manifest.json", dockerJSON},
		{blobPath(img.Config), cfgJSON},
		{blobPath(img.Manifest), manJSON},
	} {
		if err := put(f.name, int64(len(f.data)), strings.NewReader(string(f.data))); err != nil {
			return img, err
		}
	}
	want := map[string]bool{}
	for _, l := range man.Layers {
		want[blobPath(l.Digest)] = !d.Thin
	}
	err = eachEntry(base, func(h *tar.Header, r io.Reader) error {
		if !want[h.Name] {
			return nil // not a layer, or a thin archive's
		}
		delete(want, h.Name)
		return put(h.Name, h.Size, r)
	})
	if err != nil {
		return img, err
	}
	if len(want) > 0 && !d.Thin {
		return img, fmt.Errorf("base %s lacks layers %v: %w", base, want, ErrInvalid)
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return img, err
	}
	if err := put(blobPath(img.Layer), layerSize, layer); err != nil {
		return img, fmt.Errorf("write layer: %w", err)
	}
	return img, tw.Close()
}

// eachEntry calls fn for each regular file of the tar archive at path.
func eachEntry(path string, fn func(*tar.Header, io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			if err := fn(h, tr); err != nil {
				return err
			}
		}
	}
}

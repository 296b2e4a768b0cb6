package ociarchive

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
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
	index, man, cfg, err := readBase(base)
	if err != nil {
		return img, err
	}
	layer, err := stageLayer(root, tmpDir, nil)
	if err != nil {
		return img, err
	}
	defer layer.remove()
	img.Layer, img.DiffID = layer.digest, layer.diffID
	d.apply(&cfg, img.DiffID)
	layers := append(slices.Clone(man.Layers), layer.descriptor())
	files, err := describe(&img, cfg, layers, index, d.Ref)
	if err != nil {
		return img, err
	}
	a := newArchive(w, d.Created)
	if err := a.begin(files); err != nil {
		return img, err
	}
	if err := a.copyLayers(base, man.Layers, d.Thin); err != nil {
		return img, err
	}
	if err := a.putLayer(layer); err != nil {
		return img, err
	}
	return img, a.tw.Close()
}

// readBase reads the base archive's index, its one manifest and its
// config.
func readBase(base string) (index v1.Index, man v1.Manifest, cfg derivedImage, err error) {
	small := map[string][]byte{} // the archive's JSON files and small blobs
	err = eachEntry(base, func(h *tar.Header, r io.Reader) error {
		if h.Size < 1<<20 {
			b, err := io.ReadAll(r)
			small[h.Name] = b
			return err
		}
		return nil
	})
	if err != nil {
		return index, man, cfg, err
	}
	if err := json.Unmarshal(small["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return index, man, cfg, fmt.Errorf("base %s: want an index of one manifest (%v): %w", base, err, ErrInvalid)
	}
	if err := json.Unmarshal(small[blobPath(index.Manifests[0].Digest)], &man); err != nil {
		return index, man, cfg, fmt.Errorf("base %s: manifest: %v: %w", base, err, ErrInvalid)
	}
	if err := json.Unmarshal(small[blobPath(man.Config.Digest)], &cfg); err != nil {
		return index, man, cfg, fmt.Errorf("base %s: config: %v: %w", base, err, ErrInvalid)
	}
	return index, man, cfg, nil
}

// apply makes d's changes to the base's config cfg, whose new top layer's
// uncompressed digest is diffID.
func (d *Derivation) apply(cfg *derivedImage, diffID digest.Digest) {
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
	cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
	cfg.History = append(cfg.History, v1.History{Created: &d.Created, CreatedBy: "psych ociarchive derive"})
}

// copyLayers copies the base's layers from its archive (thin: none, but
// the base must hold them all otherwise).
func (a *archive) copyLayers(base string, layers []v1.Descriptor, thin bool) error {
	want := map[string]bool{}
	for _, l := range layers {
		want[blobPath(l.Digest)] = !thin
	}
	err := eachEntry(base, func(h *tar.Header, r io.Reader) error {
		if !want[h.Name] {
			return nil // not a layer, or a thin archive's
		}
		delete(want, h.Name)
		return a.put(h.Name, h.Size, r)
	})
	if err != nil {
		return err
	}
	if len(want) > 0 && !thin {
		return fmt.Errorf("base %s lacks layers %v: %w", base, want, ErrInvalid)
	}
	return nil
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

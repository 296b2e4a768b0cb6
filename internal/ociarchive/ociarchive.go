// Package ociarchive writes a one-layer container image, built from a root
// filesystem directory, as an image archive that every engine psych uses can
// import without a registry: containerd (`ctr images import`), podman
// (`podman load`) and docker (`docker load`). The archive is an OCI image
// layout (oci-layout, index.json, blobs) that also carries docker's
// manifest.json, pointing at the same blobs.
//
// The layer is the directory's tree as the host sees it: owners, modes,
// symlinks and hard links kept; setuid and setgid bits dropped (no_new_privs
// makes them inert in psych's sandboxes anyway); device nodes, sockets and
// extended attributes (file capabilities among them) left out, as is the
// content of the directories named in Options.Empty.
package ociarchive

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Options describe the image.
type Options struct {
	// Ref is the image's name, such as "localhost/psych-python:3.11".
	Ref string
	// Labels, Env and Cmd go into the image config.
	Labels map[string]string
	Env    []string
	Cmd    []string
	// Created is the image's creation time. Zero: now.
	Created time.Time
	// Empty lists directories (relative to the root, "dev") that are kept
	// but whose content is left out.
	Empty []string
}

// Image is what Write wrote.
type Image struct {
	// Manifest is the manifest's digest: the image's identity.
	Manifest digest.Digest
	Config   digest.Digest
	// Layer is the compressed layer's digest, DiffID the uncompressed one's.
	Layer, DiffID digest.Digest
}

// ErrInvalid: the options or the root cannot make an image.
var ErrInvalid = errors.New("invalid image")

// Write writes the archive of the image built from root to w. The layer is
// staged in a temporary file under tmpDir ("" for the system's).
func Write(w io.Writer, root, tmpDir string, o Options) (Image, error) {
	var img Image
	if o.Ref == "" || strings.ContainsAny(o.Ref, " \t\n") {
		return img, fmt.Errorf("image ref %q: %w", o.Ref, ErrInvalid)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return img, fmt.Errorf("root %s is not a directory (%v): %w", root, err, ErrInvalid)
	}
	if o.Created.IsZero() {
		o.Created = time.Now().UTC()
	}
	layer, err := os.CreateTemp(tmpDir, "psych-layer-*.tar.gz")
	if err != nil {
		return img, fmt.Errorf("stage layer: %w", err)
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	compressed, uncompressed := sha256.New(), sha256.New()
	zw, _ := gzip.NewWriterLevel(io.MultiWriter(layer, compressed), gzip.BestSpeed)
	if err := writeTree(io.MultiWriter(zw, uncompressed), root, o.Empty); err != nil {
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

	arch := runtime.GOARCH
	cfg := v1.Image{
		Created:  &o.Created,
		Platform: v1.Platform{Architecture: arch, OS: "linux"},
		Config:   v1.ImageConfig{Env: o.Env, Cmd: o.Cmd, Labels: o.Labels},
		RootFS:   v1.RootFS{Type: "layers", DiffIDs: []digest.Digest{img.DiffID}},
		History:  []v1.History{{Created: &o.Created, CreatedBy: "psych ociarchive"}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return img, err
	}
	img.Config = digest.FromBytes(cfgJSON)
	man := v1.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageManifest,
		Config:    v1.Descriptor{MediaType: v1.MediaTypeImageConfig, Digest: img.Config, Size: int64(len(cfgJSON))},
		Layers:    []v1.Descriptor{{MediaType: v1.MediaTypeImageLayerGzip, Digest: img.Layer, Size: layerSize}},
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return img, err
	}
	img.Manifest = digest.FromBytes(manJSON)
	index := v1.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: v1.MediaTypeImageManifest, Digest: img.Manifest, Size: int64(len(manJSON)),
			Platform: &v1.Platform{Architecture: arch, OS: "linux"},
			Annotations: map[string]string{
				"io.containerd.image.name": o.Ref,
				v1.AnnotationRefName:       o.Ref,
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return img, err
	}
	dockerJSON, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{blobPath(img.Config), []string{o.Ref}, []string{blobPath(img.Layer)}}})
	if err != nil {
		return img, err
	}

	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{v1.ImageLayoutFile, []byte(`{"imageLayoutVersion":"` + v1.ImageLayoutVersion + `"}`)},
		{"index.json", indexJSON},
		{"manifest.json", dockerJSON},
		{blobPath(img.Config), cfgJSON},
		{blobPath(img.Manifest), manJSON},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: o.Created}); err != nil {
			return img, err
		}
	}
	for _, f := range files {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: o.Created}
		if err := tw.WriteHeader(hdr); err != nil {
			return img, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return img, err
		}
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return img, err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: blobPath(img.Layer), Mode: 0o644, Size: layerSize, ModTime: o.Created}
	if err := tw.WriteHeader(hdr); err != nil {
		return img, err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return img, fmt.Errorf("write layer: %w", err)
	}
	if err := tw.Close(); err != nil {
		return img, err
	}
	return img, nil
}

func sum(h hash.Hash) digest.Digest {
	return digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(h.Sum(nil)))
}

func blobPath(d digest.Digest) string { return "blobs/" + d.Algorithm().String() + "/" + d.Encoded() }

// writeTree writes root's tree as a layer tar.
func writeTree(w io.Writer, root string, empty []string) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{} // (dev, ino) -> the first name of a hard-linked file
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		mode := fi.Mode()
		if mode&(fs.ModeDevice|fs.ModeCharDevice|fs.ModeSocket) != 0 {
			return nil
		}
		target := ""
		if mode&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		hdr.Name, hdr.Uname, hdr.Gname, hdr.Format = rel, "", "", tar.FormatPAX
		hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
		hdr.Mode &^= 0o6000 // no setuid, no setgid
		if st, ok := statOf(fi); ok {
			hdr.Uid, hdr.Gid = st.uid, st.gid
			if mode.IsRegular() && st.nlink > 1 {
				key := [2]uint64{st.dev, st.ino}
				if first, ok := links[key]; ok {
					hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				} else {
					links[key] = rel
				}
			}
		}
		if mode.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, hdr.Size)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		if mode.IsDir() && slices.Contains(empty, rel) {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write layer: %w", err)
	}
	return tw.Close()
}

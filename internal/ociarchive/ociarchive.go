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
	"bytes"
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
	layer, err := stageLayer(root, tmpDir, o.Empty)
	if err != nil {
		return img, err
	}
	defer layer.remove()
	img.Layer, img.DiffID = layer.digest, layer.diffID
	platform := v1.Platform{Architecture: runtime.GOARCH, OS: "linux"}
	cfg := v1.Image{
		Created:  &o.Created,
		Platform: platform,
		Config:   v1.ImageConfig{Env: o.Env, Cmd: o.Cmd, Labels: o.Labels},
		RootFS:   v1.RootFS{Type: "layers", DiffIDs: []digest.Digest{img.DiffID}},
		History:  []v1.History{{Created: &o.Created, CreatedBy: "psych ociarchive"}},
	}
	index := v1.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageIndex,
		Manifests: []v1.Descriptor{{MediaType: v1.MediaTypeImageManifest, Platform: &platform}},
	}
	files, err := describe(&img, cfg, []v1.Descriptor{layer.descriptor()}, index, o.Ref)
	if err != nil {
		return img, err
	}
	a := newArchive(w, o.Created)
	if err := a.begin(files); err != nil {
		return img, err
	}
	if err := a.putLayer(layer); err != nil {
		return img, err
	}
	return img, a.tw.Close()
}

// stagedLayer is root's tree as a gzipped layer tar in a temporary file,
// with its digests and size.
type stagedLayer struct {
	f              *os.File
	size           int64
	digest, diffID digest.Digest
}

// stageLayer writes root's tree (empty's directories without their
// content) as a compressed layer to a temporary file under tmpDir.
func stageLayer(root, tmpDir string, empty []string) (_ *stagedLayer, retErr error) {
	f, err := os.CreateTemp(tmpDir, "psych-layer-*.tar.gz")
	if err != nil {
		return nil, fmt.Errorf("stage layer: %w", err)
	}
	l := &stagedLayer{f: f}
	defer func() {
		if retErr != nil {
			l.remove()
		}
	}()
	compressed, uncompressed := sha256.New(), sha256.New()
	zw, _ := gzip.NewWriterLevel(io.MultiWriter(f, compressed), gzip.BestSpeed)
	if err := writeTree(io.MultiWriter(zw, uncompressed), root, empty); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress layer: %w", err)
	}
	if l.size, err = f.Seek(0, io.SeekCurrent); err != nil {
		return nil, err
	}
	l.digest, l.diffID = sum(compressed), sum(uncompressed)
	return l, nil
}

// remove closes and removes the staged file.
func (l *stagedLayer) remove() {
	l.f.Close()
	os.Remove(l.f.Name())
}

func (l *stagedLayer) descriptor() v1.Descriptor {
	return v1.Descriptor{MediaType: v1.MediaTypeImageLayerGzip, Digest: l.digest, Size: l.size}
}

// file is one small file of an archive.
type file struct {
	name string
	data []byte
}

// describe sets img's Config and Manifest for cfg and layers, and returns
// the archive's small files: oci-layout, index.json (index, whose one
// manifest descriptor is filled in and named ref), docker's manifest.json
// and the config and manifest blobs.
func describe(img *Image, cfg any, layers []v1.Descriptor, index v1.Index, ref string) ([]file, error) {
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	img.Config = digest.FromBytes(cfgJSON)
	man := v1.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageManifest,
		Config:    v1.Descriptor{MediaType: v1.MediaTypeImageConfig, Digest: img.Config, Size: int64(len(cfgJSON))},
		Layers:    layers,
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return nil, err
	}
	img.Manifest = digest.FromBytes(manJSON)
	desc := index.Manifests[0]
	desc.Digest, desc.Size = img.Manifest, int64(len(manJSON))
	desc.Annotations = map[string]string{"io.containerd.image.name": ref, v1.AnnotationRefName: ref}
	index.Manifests = []v1.Descriptor{desc}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return nil, err
	}
	var layerPaths []string
	for _, l := range layers {
		layerPaths = append(layerPaths, blobPath(l.Digest))
	}
	dockerJSON, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{blobPath(img.Config), []string{ref}, layerPaths}})
	if err != nil {
		return nil, err
	}
	return []file{
		{v1.ImageLayoutFile, []byte(`{"imageLayoutVersion":"` + v1.ImageLayoutVersion + `"}`)},
		{"index.json", indexJSON},
		{"manifest.json", dockerJSON},
		{blobPath(img.Config), cfgJSON},
		{blobPath(img.Manifest), manJSON},
	}, nil
}

// archive is the image archive being written: every entry dated created.
type archive struct {
	tw      *tar.Writer
	created time.Time
}

func newArchive(w io.Writer, created time.Time) *archive {
	return &archive{tw: tar.NewWriter(w), created: created}
}

// begin writes the blob directories and the small files.
func (a *archive) begin(files []file) error {
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: a.created}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := a.put(f.name, int64(len(f.data)), bytes.NewReader(f.data)); err != nil {
			return err
		}
	}
	return nil
}

// put writes one regular file of size bytes read from r.
func (a *archive) put(name string, size int64, r io.Reader) error {
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: a.created}
	if err := a.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := io.CopyN(a.tw, r, size)
	return err
}

// putLayer writes the staged layer as its blob.
func (a *archive) putLayer(l *stagedLayer) error {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := a.put(blobPath(l.digest), l.size, l.f); err != nil {
		return fmt.Errorf("write layer: %w", err)
	}
	return nil
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

package run

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/psych-runtime/psych/sandbox"
)

// fileFlags are --file LOCAL[:PATH] (repeatable), --out DIR and --force.
type fileFlags struct {
	files []string
	out   string
	force bool
}

// fileList is --file's flag.Value: each use adds one.
type fileList struct{ f *fileFlags }

func (l fileList) String() string {
	if l.f == nil {
		return ""
	}
	return strings.Join(l.f.files, ",")
}

func (l fileList) Set(v string) error {
	if v == "" {
		return errors.New("want LOCAL or LOCAL:PATH")
	}
	l.f.files = append(l.f.files, v)
	return nil
}

// requestFiles reads each --file: LOCAL (a regular file, read no further
// than the files cap) into PATH under /work, by default LOCAL's base
// name, with LOCAL's permission bits. LOCAL holds no colon; the first
// one starts PATH. The backend checks the paths and the caps.
func (f *fileFlags) requestFiles() ([]sandbox.File, error) {
	var out []sandbox.File
	var total int64
	for _, spec := range f.files {
		local, dest, ok := strings.Cut(spec, ":")
		if !ok {
			dest = filepath.Base(local)
		}
		file, err := os.Open(local)
		if err != nil {
			return nil, fmt.Errorf("--file %s: %w", spec, err)
		}
		fi, err := file.Stat()
		if err == nil && !fi.Mode().IsRegular() {
			err = fmt.Errorf("not a regular file")
		}
		var data []byte
		if err == nil {
			max := sandbox.DefaultFileCaps.InBytes - total
			data, err = io.ReadAll(io.LimitReader(file, max+1))
			if err == nil && int64(len(data)) > max {
				err = fmt.Errorf("the files pass the cap of %d bytes", sandbox.DefaultFileCaps.InBytes)
			}
		}
		file.Close()
		if err != nil {
			return nil, fmt.Errorf("--file %s: %w", spec, err)
		}
		total += int64(len(data))
		out = append(out, sandbox.File{Path: dest, Data: data, Mode: uint32(fi.Mode().Perm())})
	}
	return out, nil
}

// writeOut writes res's files into --out DIR (made if missing), and its
// artifacts (figures) as DIR/artifacts/NAME, through
// an os.Root, so that no path of the result reaches outside DIR: exec,
// setuid, setgid and sticky bits dropped; a file already there is an
// error unless --force. It tells on stderr what it wrote and what the run
// left out, names with control characters escaped. It returns the first
// error, after trying every file.
func (f *fileFlags) writeOut(res *sandbox.Result, stderr io.Writer) error {
	if f.out == "" || res == nil {
		return nil
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	root, err := os.OpenRoot(f.out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer root.Close()
	var first error
	for _, file := range res.Files {
		if err := writeOne(root, file, f.force); err != nil {
			fmt.Fprintf(stderr, "psych run: --out: %s: %v\n", printable(file.Path), err)
			if first == nil {
				first = err
			}
			continue
		}
		fmt.Fprintf(stderr, "psych run: wrote %s (%d bytes)\n", printable(filepath.Join(f.out, file.Path)), file.Size)
	}
	for _, o := range res.FilesOmitted {
		fmt.Fprintf(stderr, "psych run: left out %s (%d bytes): %s\n", printable(o.Path), o.Size, o.Reason)
	}
	for _, a := range res.Artifacts {
		// A name is one path element (a server's answer is not trusted
		// either): artifacts/NAME, never anywhere else.
		err := fmt.Errorf("not a file name")
		if fs.ValidPath(a.Name) && !strings.Contains(a.Name, "/") {
			err = writeOne(root, sandbox.OutFile{Path: "artifacts/" + a.Name, Mode: 0o644, Data: a.Data}, f.force)
		}
		if err != nil {
			fmt.Fprintf(stderr, "psych run: --out: artifact %s: %v\n", printable(a.Name), err)
			if first == nil {
				first = err
			}
			continue
		}
		fmt.Fprintf(stderr, "psych run: wrote %s (%dx%d, %d bytes)\n", printable(filepath.Join(f.out, "artifacts", a.Name)), a.Width, a.Height, len(a.Data))
	}
	for _, o := range res.ArtifactsOmitted {
		fmt.Fprintf(stderr, "psych run: left out artifact %s (%d bytes): %s\n", printable(o.Path), o.Size, o.Reason)
	}
	return first
}

func writeOne(root *os.Root, file sandbox.OutFile, force bool) error {
	if !fs.ValidPath(file.Path) || path.Clean(file.Path) != file.Path {
		return fmt.Errorf("not a relative, clean path")
	}
	if dir := path.Dir(file.Path); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	w, err := root.OpenFile(file.Path, flags, os.FileMode(file.Mode&0o666))
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("already there (--force overwrites)")
	}
	if err != nil {
		return err
	}
	_, err = w.Write(file.Data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil && force {
		// A file overwritten keeps its mode: give it the run's, less exec.
		err = root.Chmod(file.Path, os.FileMode(file.Mode&0o666))
	}
	return err
}

// printable is name as it may be printed: quoted, with its control
// characters and invalid bytes escaped, where it has any.
func printable(name string) string {
	for _, r := range name {
		if r == unicode.ReplacementChar || unicode.IsControl(r) {
			return strconv.Quote(name)
		}
	}
	return name
}

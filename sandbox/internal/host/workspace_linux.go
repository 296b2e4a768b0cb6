package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/sandbox"
)

// Workspace is a run's writable tmpfs, made by the host, whose root it
// keeps open for the run's whole life: the program sees its "tmp" as /tmp
// (HOME, TMPDIR) and its "work" as sandbox.WorkDir, one size cap for both.
// Because the host holds the root, the file system outlives the run's
// processes and mount namespace: the host writes Request.Files in before
// the program's first line and collects Result.Files after its last
// process died, always from its own side. Close releases it; with the
// mount point detached, nothing of it is left on the host.
type Workspace struct {
	mnt      string // the host mount point while attached; "" once detached
	root     int    // the tmpfs's root, O_DIRECTORY
	work     int    // its "work"
	uid, gid uint32
	in       map[string]inFile
}

type inFile struct {
	size int64
	sum  [sha256.Size]byte
}

// The workspace's directories, as the run sees them.
const (
	WorkspaceTmp  = "tmp"
	WorkspaceWork = "work"
)

// NewWorkspace mounts a tmpfs of bytes and inodes at mnt (made here, mode
// 0700), with "tmp" (mode 1777) and "work" (mode 0755) owned by the
// run's outside uid and gid. Its root is mode 0700: while it is mounted on
// the host (an engine binds its directories by path), no other local user
// reaches a run's files through it. The caller clones or binds its directories
// into the run, then Detaches it from mnt; Close releases it.
func NewWorkspace(mnt string, bytes, inodes int64, uid, gid uint32) (w *Workspace, retErr error) {
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return nil, fmt.Errorf("make the workspace's mount point: %w", err)
	}
	opts := "size=" + strconv.FormatInt(bytes, 10) + ",nr_inodes=" + strconv.FormatInt(inodes, 10) + ",mode=0700"
	if err := unix.Mount("tmpfs", mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(mnt)
		return nil, fmt.Errorf("mount the workspace: %w", os.NewSyscallError("mount", err))
	}
	w = &Workspace{mnt: mnt, root: -1, work: -1, uid: uid, gid: gid}
	defer func() {
		if retErr != nil {
			w.Close()
		}
	}()
	fd, err := unix.Open(mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the workspace: %w", os.NewSyscallError("open", err))
	}
	w.root = fd
	for _, d := range []struct {
		name string
		mode uint32
	}{{WorkspaceTmp, 0o1777}, {WorkspaceWork, 0o755}} {
		if err := mkdirOwned(w.root, d.name, d.mode, uid, gid); err != nil {
			return nil, fmt.Errorf("make the workspace's %s: %w", d.name, err)
		}
	}
	if w.work, err = unix.Openat(w.root, WorkspaceWork, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open the workspace's work: %w", os.NewSyscallError("openat", err))
	}
	return w, nil
}

// mkdirOwned makes name in dir with mode (set exactly, umask aside), owned
// by uid and gid; one that is there already is taken as it is.
func mkdirOwned(dir int, name string, mode, uid, gid uint32) error {
	if err := unix.Mkdirat(dir, name, 0o700); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return os.NewSyscallError("mkdirat", err)
	}
	if err := unix.Fchownat(dir, name, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return os.NewSyscallError("fchownat", err)
	}
	if err := unix.Fchmodat(dir, name, mode, 0); err != nil {
		return os.NewSyscallError("fchmodat", err)
	}
	return nil
}

// Path is the host path of the workspace's directory name (WorkspaceTmp,
// WorkspaceWork), for an engine that binds it; valid until Detach.
func (w *Workspace) Path(name string) string { return w.mnt + "/" + name }

// Clone returns a detached clone of the workspace's directory name
// (open_tree), for an init to attach in the run's view. It needs the
// workspace still attached.
func (w *Workspace) Clone(name string) (*os.File, error) {
	fd, err := unix.OpenTree(w.root, name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("clone the workspace's %s: %w", name, os.NewSyscallError("open_tree", err))
	}
	return os.NewFile(uintptr(fd), "psych-workspace-"+name), nil
}

// Detach unmounts the workspace from its host mount point, lazily: the
// host's handle and the run's mounts keep it. It may be called more than
// once.
func (w *Workspace) Detach() error {
	if w == nil || w.mnt == "" {
		return nil
	}
	mnt := w.mnt
	w.mnt = ""
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("detach the workspace: %w", os.NewSyscallError("umount2", err))
	}
	os.Remove(mnt)
	return nil
}

// Close detaches the workspace and releases the host's handle: once the
// run's mounts are gone too, the tmpfs is freed. It may be called more
// than once.
func (w *Workspace) Close() error {
	if w == nil {
		return nil
	}
	err := w.Detach()
	for _, fd := range []*int{&w.work, &w.root} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	return err
}

// Write writes files (checked by sandbox.CheckFiles) into work, owned by
// the run's uid and gid, directories as needed (mode 0755), and remembers
// each one's hash so that Collect returns it only if the run changed it.
// Call it before the program's first line.
func (w *Workspace) Write(files []sandbox.File) error {
	if w.in == nil {
		w.in = make(map[string]inFile, len(files))
	}
	for _, f := range files {
		if err := w.write(f); err != nil {
			return fmt.Errorf("write file %q into the run: %w", f.Path, err)
		}
		w.in[f.Path] = inFile{size: int64(len(f.Data)), sum: sha256.Sum256(f.Data)}
	}
	return nil
}

func (w *Workspace) write(f sandbox.File) error {
	parts := strings.Split(f.Path, "/")
	dir := w.work
	for _, c := range parts[:len(parts)-1] {
		if err := mkdirOwned(dir, c, 0o755, w.uid, w.gid); err != nil {
			return err
		}
		nd, err := unix.Openat(dir, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != w.work {
			unix.Close(dir)
		}
		if err != nil {
			return os.NewSyscallError("openat", err)
		}
		dir = nd
	}
	if dir != w.work {
		defer unix.Close(dir)
	}
	fd, err := unix.Openat(dir, parts[len(parts)-1], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return os.NewSyscallError("openat", err)
	}
	file := os.NewFile(uintptr(fd), f.Path)
	defer file.Close()
	if _, err := file.Write(f.Data); err != nil {
		return err
	}
	mode := f.Mode
	if mode == 0 {
		mode = 0o644
	}
	if err := unix.Fchown(fd, int(w.uid), int(w.gid)); err != nil {
		return os.NewSyscallError("fchown", err)
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return os.NewSyscallError("fchmod", err)
	}
	return nil
}

// Collect walks work from the host's side and returns the regular files
// the run created or changed (by SHA-256 against what Write wrote), sorted
// by path, and every entry left out with its reason. Call it only once
// every process of the run is dead. It never follows a symlink, opens
// nothing but directories and regular files (O_NOFOLLOW, O_NONBLOCK,
// checked again by fstat once open), reads no file past its size or the
// caps, and stops reading at caps.CollectTime, listing what is left.
func (w *Workspace) Collect(caps sandbox.FileCaps) ([]sandbox.OutFile, []sandbox.Omitted) {
	var files []sandbox.OutFile
	c := collector{
		fileBytes: caps.OutFileBytes, count: caps.OutCount, totalBytes: caps.OutBytes,
		deadline: time.Now().Add(caps.CollectTime), depth: sandbox.MaxOutDepth, in: w.in,
		name: func(name string) string {
			if !utf8.ValidString(name) {
				return sandbox.OmitUnreadable
			}
			return ""
		},
		take: func(dir int, name, p string, data []byte) string {
			var st unix.Stat_t
			if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return sandbox.OmitUnreadable
			}
			sum := sha256.Sum256(data)
			files = append(files, sandbox.OutFile{
				Path: p, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
				Mode: st.Mode & 0o777, Data: data,
			})
			return ""
		},
	}
	c.dir(w.work, "", 0)
	return files, c.omitted
}

// collector walks a directory of the workspace from the host's side and
// takes its regular files under caps, as Collect and Artifacts say, listing
// every entry it leaves out with its reason. What it takes, and how, is the
// caller's: a name filter, how deep it goes, and take.
type collector struct {
	fileBytes, totalBytes int64
	count                 int
	deadline              time.Time
	// depth is how deep directories are entered; 0 enters none (a
	// directory is then not a regular file).
	depth int
	// name is why a name is refused (an Omit reason), or "".
	name func(name string) string
	// in are the files that came in: taken only if changed.
	in map[string]inFile
	// take keeps a file's bytes, or says why it refuses them.
	take func(dir int, name, p string, data []byte) string

	taken   int
	total   int64
	omitted []sandbox.Omitted
}

func (c *collector) omit(p string, size int64, reason string) {
	c.omitted = append(c.omitted, sandbox.Omitted{Path: strings.ToValidUTF8(p, "\uFFFD"), Size: size, Reason: reason})
}

// dir walks the directory open at fd (not closed here), rel below the
// collector's root.
func (c *collector) dir(fd int, rel string, depth int) {
	names, err := readNames(fd)
	if err != nil {
		c.omit(rel, 0, sandbox.OmitUnreadable)
		return
	}
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			c.omit(p, 0, sandbox.OmitUnreadable)
			continue
		}
		reason := c.name(name)
		switch {
		case time.Now().After(c.deadline):
			c.omit(p, sizeOf(&st), sandbox.OmitTimeCap)
		case reason != "":
			c.omit(p, sizeOf(&st), reason)
		case st.Mode&unix.S_IFMT == unix.S_IFDIR && c.depth > 0:
			if depth+1 > c.depth {
				c.omit(p, 0, sandbox.OmitUnreadable)
				continue
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				c.omit(p, 0, sandbox.OmitUnreadable)
				continue
			}
			c.dir(sub, p, depth+1)
			unix.Close(sub)
		case st.Mode&unix.S_IFMT == unix.S_IFREG:
			c.file(fd, name, p, st.Size)
		default:
			c.omit(p, sizeOf(&st), sandbox.OmitNotRegular)
		}
	}
}

func sizeOf(st *unix.Stat_t) int64 {
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return 0
	}
	return st.Size
}

// readNames lists the directory at fd, sorted, without . and ..
func readNames(fd int) ([]string, error) {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// file takes the regular file name of dir (p below the root, size as
// lstat saw it), or omits it.
func (c *collector) file(dir int, name, p string, size int64) {
	in, isIn := c.in[p]
	var data []byte
	if isIn && in.size == size {
		// The same size as it came in: unchanged unless its hash differs.
		var err error
		if data, err = readRegular(dir, name, size); err != nil {
			c.omit(p, size, sandbox.OmitUnreadable)
			return
		}
		if sha256.Sum256(data) == in.sum {
			return
		}
	}
	switch {
	case size > c.fileBytes:
		c.omit(p, size, sandbox.OmitTooLarge)
		return
	case c.taken >= c.count:
		c.omit(p, size, sandbox.OmitCountCap)
		return
	case c.total+size > c.totalBytes:
		c.omit(p, size, sandbox.OmitTotalCap)
		return
	}
	if data == nil {
		var err error
		if data, err = readRegular(dir, name, size); err != nil {
			c.omit(p, size, sandbox.OmitUnreadable)
			return
		}
	}
	if reason := c.take(dir, name, p, data); reason != "" {
		c.omit(p, size, reason)
		return
	}
	c.taken++
	c.total += int64(len(data))
}

// readRegular reads the regular file name of dir, of size bytes: opened
// without following a symlink and without blocking (a FIFO swapped in
// would not hold the host), checked by fstat once open, and read no
// further than size.
func readRegular(dir int, name string, size int64) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("openat", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, os.NewSyscallError("fstat", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size {
		return nil, fmt.Errorf("%s changed as it was read", name)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, err
	}
	return data, nil
}

// WorkspaceFigures is sandbox.FiguresDir's name in the workspace's tmp.
const WorkspaceFigures = ".psych-figures"

// Artifacts collects the run's figures from tmp's WorkspaceFigures, as
// Collect does files (no symlink followed, nothing but regular files
// opened, nothing read past its size, the caps and caps.CollectTime
// kept): each entry named as the bootstrap names figures and holding a
// PNG that CheckPNG takes, sorted by name. Every other entry, and each
// one a cap keeps out, is listed with its reason. A missing directory is
// no artifacts. Call it only once every process of the run is dead.
func (w *Workspace) Artifacts(caps sandbox.FileCaps) ([]sandbox.Artifact, []sandbox.Omitted) {
	var arts []sandbox.Artifact
	tmp, err := unix.Openat(w.root, WorkspaceTmp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, []sandbox.Omitted{{Path: ".", Reason: sandbox.OmitUnreadable}}
	}
	defer unix.Close(tmp)
	var st unix.Stat_t
	if err := unix.Fstatat(tmp, WorkspaceFigures, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, []sandbox.Omitted{{Path: ".", Reason: sandbox.OmitUnreadable}}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, []sandbox.Omitted{{Path: ".", Size: sizeOf(&st), Reason: sandbox.OmitNotRegular}}
	}
	dir, err := unix.Openat(tmp, WorkspaceFigures, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, []sandbox.Omitted{{Path: ".", Reason: sandbox.OmitUnreadable}}
	}
	defer unix.Close(dir)
	c := collector{
		fileBytes: caps.ArtifactFileBytes, count: caps.ArtifactCount, totalBytes: caps.ArtifactBytes,
		deadline: time.Now().Add(caps.CollectTime),
		name: func(name string) string {
			if !figureName.MatchString(name) {
				return sandbox.OmitInvalid
			}
			return ""
		},
		take: func(_ int, name, _ string, data []byte) string {
			width, height, err := CheckPNG(data)
			if err != nil {
				return sandbox.OmitInvalid
			}
			sum := sha256.Sum256(data)
			arts = append(arts, sandbox.Artifact{
				Name: name, MIME: sandbox.MIMEPNG, Width: width, Height: height,
				Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Data: data,
			})
			return ""
		},
	}
	c.dir(dir, ".", 0) // "." names the directory itself, and no entry
	return arts, c.omitted
}

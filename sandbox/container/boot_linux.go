//go:build linux && cgo

package container

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
)

// Where psych's files are inside every container.
const (
	bootDir = "/.psych/boot" // the init: this executable, its loader and libraries; /etc files
	runDir  = "/.psych/run"  // the run's own: the plan and the sync and wire sockets
	// wireSock is the wire's socket in runDir (nsexec names the others:
	// ContainerPlan, ContainerSync).
	wireSock = "wire.sock"
)

// boot is the init's files on the host, made once per Sandbox and bound
// read-only at bootDir in each of its containers: this process's own
// executable (its nsexec constructor becomes the container's init, before
// any Go runtime starts), the dynamic loader and the shared objects it
// needs, taken from the very files this process was loaded with, and the
// sandbox's /etc files. The container's own libraries are never used: the
// loader is run with --library-path and --inhibit-cache.
type boot struct {
	dir  string
	args []string // the init's argv, as the container sees it
}

func newBoot(base string, owner cgroups.Owner, profile *specs.LinuxSeccomp) (b *boot, retErr error) {
	dir, err := resources.NewRunDir(base, owner, 0o755, false, 0, 0)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			resources.RemoveAll(dir)
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		exe = "/proc/self/exe" // deleted or replaced: the running one
	}
	if err := place("/proc/self/exe", exe, filepath.Join(dir, "init")); err != nil {
		return nil, err
	}
	b = &boot{dir: dir, args: []string{bootDir + "/init"}}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o555); err != nil {
		return nil, err
	}
	js, err := json.Marshal(profile)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "seccomp.json"), js, 0o444); err != nil {
		return nil, err
	}
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("read this executable: %w", err)
	}
	defer f.Close()
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			data, err := io.ReadAll(p.Open())
			if err != nil {
				return nil, fmt.Errorf("read PT_INTERP: %w", err)
			}
			interp = strings.TrimRight(string(data), "\x00")
		}
	}
	if interp == "" {
		return b, etc(dir) // a static executable needs nothing else
	}
	libs, err := neededLibs(f, interp)
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(dir, "lib"), 0o755); err != nil {
		return nil, err
	}
	for name, path := range libs {
		if err := place(path, path, filepath.Join(dir, "lib", name)); err != nil {
			return nil, err
		}
	}
	loader := filepath.Base(interp)
	b.args = []string{bootDir + "/lib/" + loader, "--inhibit-cache", "--library-path", bootDir + "/lib", bootDir + "/init"}
	return b, etc(dir)
}

// mount gives one run an overlay of the boot directory of its own, read-only
// at dir/boot, and returns its path: the run binds its init and /etc files
// from there. A bind of the boot directory itself would share its inodes
// with every run of the Sandbox, and an inotify or fanotify watch is on an
// inode: a run watching /.psych/boot or /etc/passwd would see every other
// run's init start. The overlay's inodes are the run's own; its second
// layer is an empty directory (overlayfs without an upper layer wants two).
// unmountBoot undoes it.
func (b *boot) mount(dir string) (string, error) {
	empty, root := filepath.Join(dir, "boot-empty"), filepath.Join(dir, "boot")
	for _, d := range []string{empty, root} {
		if err := os.Mkdir(d, 0o555); err != nil {
			return "", fmt.Errorf("the run's boot overlay: %w", err)
		}
	}
	esc := strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`)
	opts := "lowerdir=" + esc.Replace(b.dir) + ":" + esc.Replace(empty) + ",redirect_dir=nofollow,metacopy=off,xino=on"
	if err := unix.Mount("overlay", root, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return "", fmt.Errorf("mount the run's boot overlay: %w", err)
	}
	return root, nil
}

// unmountBoot detaches a run's boot overlay (mount).
func unmountBoot(root string) error {
	if err := unix.Unmount(root, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount the run's boot overlay: %w", err)
	}
	return nil
}

// etc writes the sandbox's /etc files into dir/etc, and an empty
// preloadList.
func etc(dir string) error {
	if err := os.Mkdir(filepath.Join(dir, "etc"), 0o755); err != nil {
		return err
	}
	for _, f := range resources.EtcFiles() {
		if err := os.WriteFile(filepath.Join(dir, f.Path), []byte(f.Content), 0o444); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, preloadList), nil, 0o444)
}

// neededLibs maps each shared object exe needs (its DT_NEEDED, and theirs)
// and the loader interp to the file this process has it mapped from.
func neededLibs(exe *elf.File, interp string) (map[string]string, error) {
	mapped, err := mappedObjects()
	if err != nil {
		return nil, err
	}
	bySoname := map[string]string{}
	for _, path := range mapped {
		f, err := elf.Open(path)
		if err != nil {
			continue
		}
		names, _ := f.DynString(elf.DT_SONAME)
		f.Close()
		for _, n := range names {
			if _, ok := bySoname[n]; !ok {
				bySoname[n] = path
			}
		}
	}
	out := map[string]string{}
	loader := filepath.Base(interp)
	if p, ok := bySoname[loader]; ok {
		out[loader] = p
	} else if p, err := filepath.EvalSymlinks(interp); err == nil {
		out[loader] = p
	} else {
		return nil, fmt.Errorf("find the dynamic loader %s: %w", interp, err)
	}
	todo, err := exe.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("read this executable's libraries: %w", err)
	}
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if _, done := out[name]; done {
			continue
		}
		path, ok := bySoname[name]
		if !ok {
			return nil, fmt.Errorf("this executable needs %s, which it has not mapped", name)
		}
		out[name] = path
		f, err := elf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		more, _ := f.ImportedLibraries()
		f.Close()
		todo = append(todo, more...)
	}
	return out, nil
}

// mappedObjects lists the files this process has mapped, /proc/self/maps'
// pathnames, the executable itself left out.
func mappedObjects() ([]string, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	self, _ := os.Readlink("/proc/self/exe")
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		p := strings.Join(fields[5:], " ")
		if p != self && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, sc.Err()
}

// place puts src at dst: a hard link of path where the file systems allow,
// else a copy of src's content. Read-only and executable by all.
func place(src, path, dst string) error {
	if err := os.Link(path, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", path, err)
	}
	return out.Close()
}

package subprocess

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runCgroup is one run's cgroup on the unified hierarchy. It carries no
// controllers here; it gives membership (the child is cloned into it),
// whole-tree kill (cgroup.kill) and whole-run CPU (cpu.stat), which the
// unified hierarchy provides even with no controller enabled. The cgroups
// package (a later step) adds the v2/v1 resource controllers.
type runCgroup struct {
	path string
	dir  *os.File // opened for CLONE_INTO_CGROUP
}

// unifiedParent returns (creating it) the directory under which this host
// process makes its run cgroups: a "psych" child of its own unified cgroup.
func unifiedParent() (string, error) {
	mnt, err := unifiedMount()
	if err != nil {
		return "", err
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read own cgroup: %w", err)
	}
	rel := ""
	for _, line := range strings.Split(string(own), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	if rel == "" {
		return "", errors.New("no unified cgroup in /proc/self/cgroup")
	}
	parent := filepath.Join(mnt, filepath.Clean("/"+rel), "psych")
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create cgroup parent: %w", err)
	}
	if err := unix.Access(parent, unix.W_OK|unix.X_OK); err != nil {
		return "", fmt.Errorf("cgroup parent %s is not writable: %w", parent, err)
	}
	return parent, nil
}

// unifiedMount finds the cgroup2 mount point in /proc/self/mountinfo.
func unifiedMount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if f := strings.Fields(post); len(f) > 0 && f[0] == "cgroup2" {
			if pf := strings.Fields(pre); len(pf) >= 5 {
				return unescapeMount(pf[4]), nil
			}
		}
	}
	return "", errors.New("no cgroup2 mount")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newRunCgroup creates parent/name and opens it for CLONE_INTO_CGROUP.
func newRunCgroup(parent, name string) (*runCgroup, error) {
	path := filepath.Join(parent, name)
	if err := os.Mkdir(path, 0o755); err != nil {
		return nil, fmt.Errorf("create run cgroup: %w", err)
	}
	dir, err := os.OpenFile(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("open run cgroup: %w", err)
	}
	return &runCgroup{path: path, dir: dir}, nil
}

// kill sends SIGKILL to every process in the cgroup.
func (c *runCgroup) kill() error {
	err := os.WriteFile(filepath.Join(c.path, "cgroup.kill"), []byte("1"), 0)
	if err == nil || errors.Is(err, os.ErrNotExist) && !c.exists() {
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("kill run cgroup: %w", err)
	}
	// Kernels before 5.14 have no cgroup.kill: signal each member.
	for _, pid := range c.pids() {
		if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
			return fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	return nil
}

func (c *runCgroup) exists() bool {
	_, err := os.Stat(c.path)
	return err == nil
}

func (c *runCgroup) pids() []int {
	b, _ := os.ReadFile(filepath.Join(c.path, "cgroup.procs"))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// populated reports whether any process is left in the cgroup.
func (c *runCgroup) populated() bool {
	b, err := os.ReadFile(filepath.Join(c.path, "cgroup.events"))
	if err != nil {
		return len(c.pids()) > 0
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// killAndWait kills the tree and waits until the cgroup is empty.
func (c *runCgroup) killAndWait(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		if err := c.kill(); err != nil {
			return err
		}
		if !c.populated() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("run cgroup %s still populated after %v", c.path, timeout)
		}
		time.Sleep(delay)
	}
}

// cpuUsage is the CPU time all processes of the cgroup consumed.
func (c *runCgroup) cpuUsage() (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(c.path, "cpu.stat"))
	if err != nil {
		return 0, fmt.Errorf("read cpu.stat: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse cpu.stat: %w", err)
			}
			return time.Duration(n) * time.Microsecond, nil
		}
	}
	return 0, errors.New("cpu.stat has no usage_usec")
}

// remove kills what is left, waits for it, and removes the cgroup.
func (c *runCgroup) remove() error {
	c.dir.Close()
	err := c.killAndWait(5 * time.Second)
	for i := 0; i < 100; i++ {
		rerr := os.Remove(c.path)
		if rerr == nil || errors.Is(rerr, os.ErrNotExist) {
			return err
		}
		if !errors.Is(rerr, unix.EBUSY) {
			return errors.Join(err, fmt.Errorf("remove run cgroup: %w", rerr))
		}
		time.Sleep(time.Millisecond)
	}
	return errors.Join(err, fmt.Errorf("remove run cgroup %s: still busy", c.path))
}

// removeStaleCgroups kills and removes run cgroups under parent whose owner
// is dead. A live owner's cgroups are never touched.
func removeStaleCgroups(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if owner, ok := parseOwner(e.Name()); ok && e.IsDir() && !owner.alive() {
			c := &runCgroup{path: filepath.Join(parent, e.Name())}
			c.killAndWait(time.Second)
			os.Remove(c.path)
		}
	}
}

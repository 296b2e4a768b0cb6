//go:build linux && cgo

package container

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/sandbox"
)

// cliEngine runs containers through podman's or docker's command line:
// one attached `run` per execution, its output the container's, and an
// `rm -f` after it, off the request path.
type cliEngine struct {
	kind   Engine
	bin    string
	global []string // flags before the subcommand
	img    sandbox.Image
	python string
	extra  []string
	unset  []string // the image's environment names, unset in every run (docker)
}

// allowedExtraFlags are the run flags ExtraRunArgs may carry: none of them
// can reach the host, add privilege, or change what psych sets. Anything
// else is refused at New (psych's own flags win as well, and the floor is
// checked on every run).
var allowedExtraFlags = map[string]bool{
	"--label": true, "--annotation": true, "--cpus": true, "--cpu-shares": true, "--cpuset-cpus": true,
	"--cpuset-mems": true, "--cpu-period": true, "--cpu-quota": true, "--memory-reservation": true,
	"--blkio-weight": true, "--runtime": true, "--platform": true,
}

// psychKeyPrefix starts the label and annotation names psych sets and
// trusts (ownerLabel, runLabel): ExtraRunArgs may not set any of them.
const psychKeyPrefix = "io.psych."

// checkExtraArgs takes ExtraRunArgs apart as the engine would: each an
// allowed flag with its one value (--flag=value, or --flag value). A word
// that is no flag would end the engine's flags and make psych's own the
// command's arguments; a label or annotation named io.psych.* would
// override the owner label that reaping trusts: both are refused.
func checkExtraArgs(args []string) error {
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		if !strings.HasPrefix(name, "--") {
			return fmt.Errorf("%w: ExtraRunArgs: %q is not a flag (each is --flag=value or --flag value)", sandbox.ErrInvalidConfig, args[i])
		}
		if !allowedExtraFlags[name] {
			return fmt.Errorf("%w: ExtraRunArgs: %s is not among the flags psych lets through (%s)", sandbox.ErrInvalidConfig, name, strings.Join(sortedKeys(allowedExtraFlags), ", "))
		}
		if !hasVal {
			if i+1 == len(args) {
				return fmt.Errorf("%w: ExtraRunArgs: %s without its value", sandbox.ErrInvalidConfig, name)
			}
			i++
			val = args[i]
		}
		key, _, _ := strings.Cut(val, "=")
		if (name == "--label" || name == "--annotation") && strings.HasPrefix(strings.ToLower(strings.TrimSpace(key)), psychKeyPrefix) {
			return fmt.Errorf("%w: ExtraRunArgs: %s %s: names under %s are psych's own", sandbox.ErrInvalidConfig, name, key, psychKeyPrefix)
		}
	}
	return nil
}

func newCLI(ctx context.Context, cfg *Config, kind Engine, python string) (engine, error) {
	bin, err := exec.LookPath(string(kind))
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not installed: %w", ErrEngineUnreachable, kind, err)
	}
	if err := checkExtraArgs(cfg.ExtraRunArgs); err != nil {
		return nil, err
	}
	e := &cliEngine{kind: kind, bin: bin, extra: cfg.ExtraRunArgs}
	switch kind {
	case Podman:
		// crun refuses hybrid cgroups; runc does not. No systemd here, no
		// journald: cgroupfs and a file for events.
		e.global = []string{"--root", cfg.PodmanRoot, "--runroot", cfg.PodmanRunroot,
			"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file"}
	case Docker:
		e.global = []string{"-H", cfg.DockerHost}
	}
	vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := e.cmd(vctx, "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v: %s", ErrEngineUnreachable, kind, err, bytes.TrimSpace(out))
	}
	if err := e.inspect(ctx, cfg.Image, python); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *cliEngine) name() Engine                   { return e.kind }
func (e *cliEngine) image() (sandbox.Image, string) { return e.img, e.python }
func (e *cliEngine) userNS() bool                   { return false }
func (e *cliEngine) close() error                   { return nil }

func (e *cliEngine) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.bin, append(append([]string{}, e.global...), args...)...)
	cmd.Env = append(os.Environ(), "DOCKER_CLI_HINTS=false")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// inspect finds the image (never pulling it), its interpreter and what of
// its config must not reach a run: the names of its environment (unset in
// each run, so that psych's init starts in psych's environment alone) and
// its volumes (docker would give each run a writable one: refused).
func (e *cliEngine) inspect(ctx context.Context, ref, python string) error {
	out, err := e.cmd(ctx, "image", "inspect", ref).Output()
	if err != nil {
		load := fmt.Sprintf("%s %s load -i ARCHIVE", e.kind, strings.Join(e.global, " "))
		return fmt.Errorf("%w: %s is not in %s's store; import it with `make image` (psych's own) or `%s`, or pull it yourself with `%s pull %s`",
			ErrImageNotFound, ref, e.kind, load, e.kind, ref)
	}
	var infos []struct {
		ID, Digest string
		Config     struct {
			Env     []string
			Labels  map[string]string
			Volumes map[string]struct{}
		}
	}
	if err := json.Unmarshal(out, &infos); err != nil || len(infos) != 1 {
		return fmt.Errorf("%w: %s image inspect %s: %d images, %v", sandbox.ErrHostFault, e.kind, ref, len(infos), err)
	}
	info := infos[0]
	// docker load keeps no manifest digest: the config's is the image's id.
	digest := info.Digest
	if e.kind == Docker {
		digest = info.ID
	}
	e.img = sandbox.Image{Ref: ref, Digest: digest}
	e.python = python
	if p := info.Config.Labels[ImageLabelPython]; p != "" {
		e.python = p
	}
	if e.kind == Docker && len(info.Config.Volumes) > 0 {
		return fmt.Errorf("%w: image %s declares VOLUME %s: docker would give each run a writable volume outside TmpBytes; psych runs no image volumes (podman ignores them, containerd never makes them): use an image without VOLUME",
			sandbox.ErrInvalidConfig, ref, strings.Join(sortedKeys(info.Config.Volumes), ", "))
	}
	for _, kv := range info.Config.Env {
		if k, _, _ := strings.Cut(kv, "="); k != "" {
			e.unset = append(e.unset, k)
		}
	}
	return nil
}

// args is the run command line: the engine's own flags for psych's spec
// after ExtraRunArgs, so that psych's win.
func (e *cliEngine) args(rs *runSpec, tmpDir, shmDir string) []string {
	// No health check runs in the container beside psych's init, no image
	// volume is made, and the init starts in psych's environment alone:
	// podman unsets every default variable, the image's among them; docker
	// has no such flag and unsets each of the image's by name (--env NAME,
	// with NAME kept out of the CLI's own environment: see runCmd).
	a := []string{"run", "--name", rs.id, "--pull=never", "--log-driver=none", "--no-healthcheck"}
	if e.kind == Podman {
		a = append(a, "--unsetenv-all", "--image-volume=ignore")
	} else {
		for _, k := range e.unset {
			if !slices.ContainsFunc(rs.env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") }) {
				a = append(a, "--env", k)
			}
		}
	}
	for _, k := range sortedKeys(rs.labels) {
		a = append(a, "--label", k+"="+rs.labels[k])
	}
	a = append(a, e.extra...)
	network := "none"
	if rs.network {
		network = "host"
	}
	a = append(a,
		"--network="+network, "--ipc=none", "--cgroupns=private",
		"--read-only", "--hostname", "sandbox",
		"--cap-drop=ALL", "--security-opt=no-new-privileges", "--security-opt=seccomp="+rs.seccompFile,
		"--user", fmt.Sprintf("%d:%d", rs.uid, rs.gid),
		"--pids-limit", strconv.FormatInt(rs.pids, 10),
		"--memory", strconv.FormatInt(rs.memoryBytes, 10), "--memory-swap", strconv.FormatInt(rs.memoryBytes, 10),
	)
	for _, r := range rs.rlimits {
		a = append(a, "--ulimit", fmt.Sprintf("%s=%d:%d", strings.ToLower(strings.TrimPrefix(r.Type, "RLIMIT_")), r.Soft, r.Hard))
	}
	if e.kind == Podman {
		// podman's tmpfs takes no inode cap: /tmp and /dev/shm are capped
		// tmpfs the host mounted, bound in.
		a = append(a, "--pid=private", "--uts=private", "--read-only-tmpfs=false", "--security-opt=mask=/sys",
			"-v", shmDir+":/dev/shm:rw,nosuid,nodev,noexec")
	} else {
		a = append(a, "-v", rs.empty+":/sys:ro",
			"--tmpfs", "/dev/shm:"+strings.Join(tmpfsOptions(rs.tmpBytes/4, rs.tmpInodes, true), ","))
	}
	// /tmp and /work are the run's workspace, which the host mounted
	// nosuid and nodev; a bind keeps both (docker takes neither option).
	opts := ":rw,nosuid,nodev"
	if e.kind == Docker {
		opts = ":rw"
	}
	a = append(a, "-v", rs.tmpDir+":/tmp"+opts, "-v", rs.workDir+":"+sandbox.WorkDir+opts, "--workdir", sandbox.WorkDir)
	for _, b := range rs.binds {
		a = append(a, "-v", b.source+":"+b.target+":ro")
	}
	for _, env := range rs.env {
		a = append(a, "--env", env)
	}
	return append(append(a, "--entrypoint", rs.args[0], e.img.Ref), rs.args[1:]...)
}

func (e *cliEngine) start(ctx context.Context, rs *runSpec) (task, error) {
	t := &cliTask{e: e, id: rs.id, exited: make(chan struct{})}
	var tmpDir, shmDir string
	if e.kind == Podman {
		t.mnt = rs.scratch
		shmDir = filepath.Join(t.mnt, "shm")
		for _, m := range []struct {
			dir           string
			bytes, inodes int64
			flags         uintptr
		}{{shmDir, rs.tmpBytes / 4, rs.tmpInodes, unix.MS_NOEXEC}} {
			if err := os.Mkdir(m.dir, 0o755); err != nil {
				return nil, err
			}
			opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", m.bytes, m.inodes)
			if err := unix.Mount("tmpfs", m.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|m.flags, opts); err != nil {
				t.unmount()
				return nil, fmt.Errorf("mount the run's tmpfs: %w", err)
			}
		}
	}
	t.cmd = e.cmd(context.WithoutCancel(ctx), e.args(rs, tmpDir, shmDir)...)
	// docker's --env NAME unsets NAME only where the CLI's own environment
	// has no NAME (it would pass the CLI's value on).
	t.cmd.Env = slices.DeleteFunc(t.cmd.Env, func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(e.unset, k)
	})
	t.cmd.Stdout, t.cmd.Stderr = rs.stdout, &prefixed{w: rs.stderr, head: &t.head, mu: &t.mu}
	if err := t.cmd.Start(); err != nil {
		t.unmount()
		return nil, fmt.Errorf("%s run: %w", e.kind, err)
	}
	go func() {
		t.cmd.Wait()
		close(t.exited)
	}()
	return t, nil
}

// prefixed passes the CLI's stderr on (it is the container's) and keeps
// its first bytes, which hold the engine's own error when the container
// never started.
type prefixed struct {
	w    interface{ Write([]byte) (int, error) }
	mu   *sync.Mutex
	head *bytes.Buffer
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	if p.head.Len() < 4096 {
		p.head.Write(b[:min(len(b), 4096-p.head.Len())])
	}
	p.mu.Unlock()
	return p.w.Write(b)
}

// cliTask is one `run`.
type cliTask struct {
	e      *cliEngine
	id     string
	cmd    *exec.Cmd
	mnt    string // podman: where the run's tmpfs are mounted
	exited chan struct{}
	mu     sync.Mutex
	head   bytes.Buffer
	once   sync.Once
	err    error
}

func (t *cliTask) done() <-chan struct{} { return t.exited }
func (t *cliTask) lost() bool            { return false }

// waitOutput waits for the CLI: attached, it exits once the container did
// and its streams are copied.
func (t *cliTask) waitOutput(ctx context.Context) {
	select {
	case <-t.exited:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
}

func (t *cliTask) why() string {
	select {
	case <-t.exited:
		t.mu.Lock()
		defer t.mu.Unlock()
		return strings.TrimSpace(t.head.String())
	default:
		return ""
	}
}

func (t *cliTask) exitCode() (uint32, bool) {
	select {
	case <-t.exited:
	default:
		return 0, false
	}
	st := t.cmd.ProcessState
	if st == nil || !st.Exited() {
		return 0, false
	}
	return uint32(st.ExitCode()), true
}

func (t *cliTask) kill(ctx context.Context) error {
	select {
	case <-t.exited:
		return nil
	default:
	}
	out, err := t.e.cmd(ctx, "kill", "--signal", "KILL", t.id).CombinedOutput()
	if err != nil && !noSuchContainer(out) {
		return fmt.Errorf("%s kill: %v: %s", t.e.kind, err, bytes.TrimSpace(out))
	}
	return nil
}

func (t *cliTask) pause(ctx context.Context, frozen bool) error {
	verb := "pause"
	if !frozen {
		verb = "unpause"
	}
	if out, err := t.e.cmd(ctx, verb, t.id).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", t.e.kind, verb, err, bytes.TrimSpace(out))
	}
	return nil
}

// remove waits for the CLI and removes the container.
func (t *cliTask) remove(ctx context.Context) error {
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		select {
		case <-t.exited:
		case <-time.After(5 * time.Second):
			t.kill(ctx)
			select {
			case <-t.exited:
			case <-ctx.Done():
				t.cmd.Process.Kill()
				<-t.exited
			}
		}
		out, err := t.e.cmd(ctx, "rm", "-f", "-v", t.id).CombinedOutput()
		if err != nil && !noSuchContainer(out) {
			t.err = fmt.Errorf("%s rm: %v: %s", t.e.kind, err, bytes.TrimSpace(out))
		}
		t.unmount()
	})
	return t.err
}

// noSuchContainer reports whether the CLI said the container is gone
// (podman and docker word it differently in case).
func noSuchContainer(out []byte) bool {
	return bytes.Contains(bytes.ToLower(out), []byte("no such container"))
}

func (t *cliTask) unmount() {
	if t.mnt == "" {
		return
	}
	for _, d := range []string{"tmp", "shm"} {
		unix.Unmount(filepath.Join(t.mnt, d), unix.MNT_DETACH)
	}
}

func (e *cliEngine) reap(ctx context.Context, dead func(string) bool) (int, error) {
	format := `{{.ID}} {{index .Labels "` + ownerLabel + `"}}`
	if e.kind == Docker {
		format = `{{.ID}} {{.Label "` + ownerLabel + `"}}`
	}
	out, err := e.cmd(ctx, "ps", "-a", "--filter", "label="+ownerLabel, "--format", format).Output()
	if err != nil {
		return 0, fmt.Errorf("%s ps: %w", e.kind, err)
	}
	n := 0
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, owner, ok := strings.Cut(line, " ")
		if !ok || !dead(owner) {
			continue
		}
		if out, err := e.cmd(ctx, "rm", "-f", "-v", id).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s rm %s: %v: %s", e.kind, id, err, bytes.TrimSpace(out)))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

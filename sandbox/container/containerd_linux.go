//go:build linux && cgo

package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/image-spec/identity"

	"github.com/psych-runtime/psych/sandbox"
)

// snapshotter is the snapshotter psych's containers use.
const snapshotter = "overlayfs"

// baseVersion names the layout of psych's base snapshot; a new layout
// makes a new base (2: the mount point of preloadList; 3: /work's).
const baseVersion = "3"

// containerdEngine runs containers through the containerd client, over one
// connection kept for the Sandbox's life.
type containerdEngine struct {
	c        *client.Client
	ns       string
	img      sandbox.Image
	python   string
	base     string // psych's base snapshot: the image plus the mount points psych needs
	specOpts []oci.SpecOpts

	orphanMu sync.Mutex
	orphans  []string // runs whose task containerd lost (a restart): removed once it is back
}

// removeOrphans removes what runs broken by a lost daemon left (their
// container, task, snapshot; the shim then its cgroups and rootfs mount),
// by id, once containerd answers again: at the next run's start and at
// Close. Those it cannot remove yet wait for the next time.
func (e *containerdEngine) removeOrphans(ctx context.Context, bound time.Duration) {
	e.orphanMu.Lock()
	defer e.orphanMu.Unlock()
	if len(e.orphans) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	var still []string
	for _, id := range e.orphans {
		t := &containerdTask{e: e, id: id, exited: make(chan struct{})}
		if err := t.removeByID(ctx); err != nil {
			still = append(still, id)
			continue
		}
		if err := e.c.SnapshotService(snapshotter).Remove(ctx, id); err != nil && !errdefs.IsNotFound(err) {
			still = append(still, id)
		}
	}
	e.orphans = still
}

func newContainerd(ctx context.Context, cfg *Config, python string) (engine, error) {
	c, err := client.New(cfg.ContainerdAddress, client.WithDefaultNamespace(cfg.Namespace), client.WithTimeout(3*time.Second))
	if err != nil {
		return nil, fmt.Errorf("%w: containerd at %s: %w", ErrEngineUnreachable, cfg.ContainerdAddress, err)
	}
	vctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := c.Version(vctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: containerd at %s: %w", ErrEngineUnreachable, cfg.ContainerdAddress, err)
	}
	e := &containerdEngine{c: c, ns: cfg.Namespace, specOpts: cfg.SpecOpts}
	if err := e.prepare(ctx, cfg, python); err != nil {
		c.Close()
		return nil, err
	}
	return e, nil
}

func (e *containerdEngine) name() Engine                   { return Containerd }
func (e *containerdEngine) image() (sandbox.Image, string) { return e.img, e.python }
func (e *containerdEngine) userNS() bool                   { return true }
func (e *containerdEngine) close() error {
	e.removeOrphans(context.Background(), 20*time.Second)
	return e.c.Close()
}

// prepare finds the image (never pulling it), unpacks it if it is not yet,
// and makes psych's base snapshot over it once per image: a committed layer
// that adds only empty mount points (psych's directories, /tmp, /dev,
// /proc, the /etc files), so that each run's root can be a read-only view.
func (e *containerdEngine) prepare(ctx context.Context, cfg *Config, python string) error {
	img, err := e.c.GetImage(ctx, cfg.Image)
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %s is not in containerd's namespace %q; import it with `make image` (psych's own) or `ctr -n %s images import ARCHIVE`, or pull it yourself with `ctr -n %s images pull %s`",
			ErrImageNotFound, cfg.Image, cfg.Namespace, cfg.Namespace, cfg.Namespace, cfg.Image)
	}
	if err != nil {
		return fmt.Errorf("%w: containerd: look up image %s: %w", sandbox.ErrHostFault, cfg.Image, err)
	}
	e.img = sandbox.Image{Ref: cfg.Image, Digest: img.Target().Digest.String()}
	spec, err := img.Spec(ctx)
	if err != nil {
		return fmt.Errorf("%w: containerd: image %s config: %w", sandbox.ErrInvalidConfig, cfg.Image, err)
	}
	// The interpreter: the image's label, else the configured one, else
	// (where none was configured and the default is missing) python3 on the
	// image's PATH; the first that the base holds.
	candidates := []string{python}
	if p := spec.Config.Labels[ImageLabelPython]; p != "" {
		candidates = []string{p}
	} else if cfg.pythonFromPath {
		for _, kv := range spec.Config.Env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				for _, d := range filepath.SplitList(v) {
					if strings.HasPrefix(d, "/") {
						candidates = append(candidates, path.Join(d, "python3"))
					}
				}
			}
		}
	}
	e.python = candidates[0]
	pick := func(root string) error {
		for _, c := range candidates {
			if hasFile(root, c) == nil {
				e.python = c
				return nil
			}
		}
		return hasFile(root, candidates[0])
	}
	unpacked, err := img.IsUnpacked(ctx, snapshotter)
	if err != nil {
		return fmt.Errorf("%w: containerd: %w", sandbox.ErrHostFault, err)
	}
	if !unpacked {
		if err := img.Unpack(ctx, snapshotter); err != nil {
			return fmt.Errorf("%w: containerd: unpack %s: %w", sandbox.ErrHostFault, cfg.Image, err)
		}
	}
	diffIDs, err := img.RootFS(ctx)
	if err != nil {
		return fmt.Errorf("%w: containerd: %w", sandbox.ErrHostFault, err)
	}
	chain := identity.ChainID(diffIDs)
	e.base = "psych-base-" + baseVersion + "-" + chain.Encoded()
	sn := e.c.SnapshotService(snapshotter)
	if _, err := sn.Stat(ctx, e.base); err == nil {
		return e.checkPython(ctx, sn, pick)
	}
	// Under a lease: an active snapshot nothing refers to is garbage.
	ctx, done, err := e.c.WithLease(ctx)
	if err != nil {
		return fmt.Errorf("%w: containerd lease: %w", sandbox.ErrHostFault, err)
	}
	defer done(context.WithoutCancel(ctx))
	tmp := e.base + "-prepare-" + scratchKey()
	sn.Remove(ctx, tmp)
	mounts, err := sn.Prepare(ctx, tmp, chain.String())
	if err != nil {
		return fmt.Errorf("%w: containerd: prepare the base snapshot: %w", sandbox.ErrHostFault, err)
	}
	defer sn.Remove(ctx, tmp)
	err = mount.WithTempMount(ctx, mounts, func(root string) error {
		if err := pick(root); err != nil {
			return err
		}
		return mountPoints(root)
	})
	if err != nil {
		return err
	}
	err = sn.Commit(ctx, e.base, tmp, snapshots.WithLabels(map[string]string{"containerd.io/gc.root": time.Now().UTC().Format(time.RFC3339)}))
	if err != nil && !errdefs.IsAlreadyExists(err) {
		return fmt.Errorf("%w: containerd: commit the base snapshot: %w", sandbox.ErrHostFault, err)
	}
	removeOldBases(ctx, sn, e.base, chain.Encoded())
	return nil
}

// removeOldBases removes the base snapshots of chain that an earlier
// layout (baseVersion) made, which nothing uses any more: containerd
// refuses to remove one that a container still has below it, and that one
// stays until the next new base.
func removeOldBases(ctx context.Context, sn snapshots.Snapshotter, base, chain string) {
	var old []string
	sn.Walk(ctx, func(_ context.Context, info snapshots.Info) error {
		if info.Kind == snapshots.KindCommitted && info.Name != base &&
			strings.HasPrefix(info.Name, "psych-base-") && strings.HasSuffix(info.Name, "-"+chain) {
			old = append(old, info.Name)
		}
		return nil
	})
	for _, name := range old {
		sn.Remove(ctx, name)
	}
}

// scratchSeq numbers this process's scratch snapshots (scratchKey).
var scratchSeq atomic.Uint64

// scratchKey names a scratch snapshot of one New: this process's id and a
// number of its own, so that Sandboxes made at once in one process never
// take (nor remove) one another's. One a crashed process left is under its
// lease, which expires, and containerd's collector then removes it.
func scratchKey() string {
	return fmt.Sprintf("%d-%d", os.Getpid(), scratchSeq.Add(1))
}

// checkPython picks the interpreter in an existing base.
func (e *containerdEngine) checkPython(ctx context.Context, sn snapshots.Snapshotter, pick func(root string) error) error {
	ctx, done, err := e.c.WithLease(ctx)
	if err != nil {
		return fmt.Errorf("%w: containerd lease: %w", sandbox.ErrHostFault, err)
	}
	defer done(context.WithoutCancel(ctx))
	key := e.base + "-check-" + scratchKey()
	sn.Remove(ctx, key)
	mounts, err := sn.View(ctx, key, e.base)
	if err != nil {
		return fmt.Errorf("%w: containerd: view the base snapshot: %w", sandbox.ErrHostFault, err)
	}
	defer sn.Remove(ctx, key)
	return mount.WithReadonlyTempMount(ctx, mounts, pick)
}

// hasFile checks that p, resolved inside root, is an executable file.
func hasFile(root, p string) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	fi, err := r.Stat(path.Clean(p)[1:])
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%w: the image has no interpreter at %s (%v); set ContainerPythonBin, or the image label %s", sandbox.ErrInvalidConfig, p, err, ImageLabelPython)
	}
	return nil
}

// mountPoints makes, in a base snapshot's root, the mount points every run
// needs and the image may lack.
func mountPoints(root string) error {
	for _, d := range []string{bootDir, runDir, "/tmp", sandbox.WorkDir, "/dev", "/proc", "/etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return fmt.Errorf("%w: base snapshot: %w", sandbox.ErrHostFault, err)
		}
	}
	for _, f := range etcTargets() {
		p := filepath.Join(root, f)
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return fmt.Errorf("%w: base snapshot: %w", sandbox.ErrHostFault, err)
			}
		}
	}
	return nil
}

// startTimeout bounds the engine's create and start RPCs, which run under
// a context of their own (see start).
const startTimeout = 60 * time.Second

// start creates the run's snapshot, container and task and starts it. The
// RPCs run under a context the caller cannot cancel: a call cancelled in
// flight may still have made its object in the daemon, unseen by the
// client. The caller's cancellation is checked between the steps instead,
// and a failed or cancelled start removes what exists by the run's id.
func (e *containerdEngine) start(caller context.Context, rs *runSpec) (_ task, retErr error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(caller), startTimeout)
	defer cancel()
	e.removeOrphans(ctx, 2*time.Second) // a daemon still away costs a run no more
	ctx, done, err := e.c.WithLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd lease: %w", err)
	}
	defer done(context.WithoutCancel(ctx))
	sn := e.c.SnapshotService(snapshotter)
	t := &containerdTask{e: e, id: rs.id, exited: make(chan struct{})}
	defer func() {
		if retErr != nil {
			t.removeByID(context.WithoutCancel(ctx))
			sn.Remove(context.WithoutCancel(ctx), rs.id)
		}
	}()
	step := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("containerd %s: %w", what, err)
		}
		return caller.Err()
	}
	_, err = sn.View(ctx, rs.id, e.base, snapshots.WithLabels(rs.labels))
	if err := step("view snapshot", err); err != nil {
		return nil, err
	}
	opts := append(append([]oci.SpecOpts{}, e.specOpts...), harden(rs))
	t.ctr, err = e.c.NewContainer(ctx, rs.id,
		client.WithSnapshotter(snapshotter),
		client.WithSnapshot(rs.id),
		client.WithContainerLabels(rs.labels),
		client.WithRuntime("io.containerd.runc.v2", nil),
		client.WithNewSpec(opts...),
	)
	if err := step("new container", err); err != nil {
		return nil, err
	}
	t.task, err = t.ctr.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, rs.stdout, rs.stderr)))
	if err := step("new task", err); err != nil {
		return nil, err
	}
	wait, err := t.task.Wait(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("containerd wait: %w", err)
	}
	go func() {
		st := <-wait
		code, _, err := st.Result()
		t.mu.Lock()
		t.code, t.ok, t.gone = code, err == nil, err != nil
		t.mu.Unlock()
		close(t.exited)
	}()
	if err := step("start task", t.task.Start(ctx)); err != nil {
		return nil, err
	}
	return t, nil
}

// removeByID is remove for what the client may not hold (a start that
// failed or was cancelled, a run whose task containerd lost): the container
// and its task are looked up by the run's id first. No container is no
// error; a lookup that fails is.
func (t *containerdTask) removeByID(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if t.ctr == nil {
		c, err := t.e.c.LoadContainer(ctx, t.id)
		switch {
		case errdefs.IsNotFound(err):
		case err != nil:
			return err
		default:
			t.ctr = c
		}
	}
	if t.ctr != nil && t.task == nil {
		if tk, err := t.ctr.Task(ctx, nil); err == nil {
			t.task = tk
		}
	}
	return t.remove(ctx)
}

// containerdTask is one container and its task.
type containerdTask struct {
	e      *containerdEngine
	id     string
	ctr    client.Container
	task   client.Task
	exited chan struct{}
	mu     sync.Mutex
	code   uint32
	ok     bool
	gone   bool // the wait ended in an error: containerd lost the task
	once   sync.Once
	err    error
}

func (t *containerdTask) done() <-chan struct{} { return t.exited }

func (t *containerdTask) exitCode() (uint32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.code, t.ok
}

func (t *containerdTask) why() string { return "" }

func (t *containerdTask) waitOutput(ctx context.Context) {
	if t.task == nil || t.lost() {
		return
	}
	done := make(chan struct{})
	go func() { t.task.IO().Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	case <-time.After(10 * time.Second): // a stream held open by a stray writer
	}
}

func (t *containerdTask) lost() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gone
}

func (t *containerdTask) kill(ctx context.Context) error {
	if t.task == nil {
		return nil
	}
	err := t.task.Kill(ctx, syscall.SIGKILL, client.WithKillAll)
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
		return err
	}
	return nil
}

func (t *containerdTask) pause(ctx context.Context, frozen bool) error {
	if frozen {
		return t.task.Pause(ctx)
	}
	return t.task.Resume(ctx)
}

// remove deletes the task (killing what is left), the container and its
// snapshot, with a context of its own: it runs on every path, a cancelled
// run's included.
func (t *containerdTask) remove(ctx context.Context) error {
	t.once.Do(func() {
		if t.lost() {
			// containerd lost the task (it restarted): what is left is
			// removed once it answers again.
			t.e.orphanMu.Lock()
			t.e.orphans = append(t.e.orphans, t.id)
			t.e.orphanMu.Unlock()
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer cancel()
		var errs []error
		if t.task != nil {
			if _, err := t.task.Delete(ctx, client.WithProcessKill); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete task: %w", err))
			}
		}
		if t.ctr != nil {
			if err := t.ctr.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete container: %w", err))
			}
		}
		t.err = errors.Join(errs...)
	})
	return t.err
}

func (e *containerdEngine) reap(ctx context.Context, dead func(string) bool) (int, error) {
	list, err := e.c.Containers(ctx, fmt.Sprintf("labels.%q", ownerLabel))
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, c := range list {
		labels, err := c.Labels(ctx)
		if err != nil || !dead(labels[ownerLabel]) {
			continue
		}
		t := &containerdTask{e: e, id: c.ID(), ctr: c}
		if task, err := c.Task(ctx, nil); err == nil {
			t.task = task
			t.kill(ctx)
		}
		if err := t.remove(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	// Views a dead host made but never gave a container.
	sn := e.c.SnapshotService(snapshotter)
	var stale []string
	sn.Walk(ctx, func(ctx context.Context, info snapshots.Info) error {
		if o, ok := info.Labels[ownerLabel]; ok && dead(o) {
			stale = append(stale, info.Name)
		}
		return nil
	})
	for _, name := range stale {
		if err := sn.Remove(ctx, name); err == nil {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// harden is psych's spec, applied after every other option, so it wins.
func harden(rs *runSpec) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		fillSpec(s, rs)
		return nil
	}
}

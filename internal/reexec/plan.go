//go:build linux && cgo

package reexec

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"github.com/psych-runtime/psych/nsexec"
)

// Plan is what the init carries out, in nsexec.h's fixed order. The host
// computes every decision; the init only executes it.
type Plan struct {
	// OuterUID and OuterGID are the host-side ids of the whole tree. Never 0.
	OuterUID, OuterGID uint32
	// InnerUID and InnerGID are the ids the init drops to before exec: the
	// mapped ids inside the user namespace, or the outer ids without one.
	InnerUID, InnerGID uint32
	// Namespaces are CLONE_NEW* flags. With CLONE_NEWUSER the host writes
	// the maps (Options.UIDMap, GIDMap) before the rest are unshared.
	// CLONE_NEWPID makes the init pid 1. Zero: no namespaces.
	Namespaces uintptr
	Hostname   string
	// Root is an empty host directory the new root tmpfs is mounted on,
	// with RootData as its options. Empty: no mount plan at all.
	Root, RootData string
	Mounts         []Mount
	// Cwd is the working directory, inside the new root.
	Cwd     string
	Rlimits []Rlimit
	// Landlock is the Landlock scope flags (ABI 6) the init restricts
	// itself with; zero applies none.
	Landlock uint64
	// LandlockFS is the file-system accesses (LANDLOCK_ACCESS_FS_*, those
	// the kernel's ABI knows) the init's Landlock domain handles: each is
	// denied but beneath one of LandlockPaths that allows it. Zero: files
	// are not confined.
	LandlockFS    uint64
	LandlockPaths []LandlockPath
	// Seccomp is the BPF program (struct sock_filter[]); nil loads none.
	Seccomp []byte
	// CgroupTasks are v1 cgroups' tasks files, open for writing, that the
	// first process joins by writing "0" before anything else (a
	// single-threaded task moving itself takes no global lock); the init
	// inherits the membership. They are passed after the trees.
	CgroupTasks []*os.File
	Exe         string
	Args        []string
	Env         []string
}

// MountKind is one step of the mount plan.
type MountKind uint16

// Mount kinds.
const (
	Mkdir   MountKind = nsexec.MountMkdir
	Symlink MountKind = nsexec.MountSymlink
	File    MountKind = nsexec.MountFile
	Bind    MountKind = nsexec.MountBind
	Tmpfs   MountKind = nsexec.MountTmpfs
	Proc    MountKind = nsexec.MountProc
	// Devpts mounts a new devpts instance, Data its options.
	Devpts MountKind = nsexec.MountDevpts
	// Overlay mounts a read-only overlayfs, Data its options: the lower
	// layers' paths, resolved when it is mounted (relative ones in the new
	// root). It keeps its own clone of each, so their mounts may go.
	Overlay MountKind = nsexec.MountOverlay
	// Detach lazily unmounts everything mounted at Target, then removes it.
	Detach MountKind = nsexec.MountDetach
)

// Mount is one step of the mount plan. Target is absolute inside the new
// root.
type Mount struct {
	Kind MountKind
	// Tree is an open_tree(OPEN_TREE_CLONE) fd the host made (Bind). Nil:
	// the init clones Source itself, which needs it to reach Source.
	Tree *os.File
	// Source is the bind source, or a symlink's content.
	Source string
	Target string
	// Attr is the MOUNT_ATTR_* set on a bind (and NOEXEC on a tmpfs).
	Attr      uint64
	Recursive bool
	Mode      uint32
	// Data is a file's content or a tmpfs's options.
	Data []byte
}

// LandlockPath allows Access (a subset of Plan.LandlockFS; a file's only
// the accesses that apply to files) beneath Path, which the init opens
// after its drop to the run ids. A Path it cannot open is left out.
type LandlockPath struct {
	Path   string
	Access uint64
}

// Rlimit is one resource limit; the init only ever lowers.
type Rlimit struct {
	Resource   int
	Soft, Hard uint64
}

// encode writes the plan in nsexec.h's format and returns the files it
// passes (the trees, then the cgroup tasks files) in the order their fd
// numbers (from nsexec.FDTrees) were assigned.
func (p *Plan) encode() ([]byte, []*os.File, error) {
	if p.OuterUID == 0 || p.OuterGID == 0 {
		return nil, nil, fmt.Errorf("plan: outer ids %d:%d: %w", p.OuterUID, p.OuterGID, ErrInvalidPlan)
	}
	if p.Exe == "" || len(p.Args) == 0 {
		return nil, nil, fmt.Errorf("plan: no interpreter: %w", ErrInvalidPlan)
	}
	if len(p.Mounts) > 0 && (p.Root == "" || p.RootData == "") {
		return nil, nil, fmt.Errorf("plan: mounts without a root: %w", ErrInvalidPlan)
	}
	if len(p.Seccomp)%8 != 0 {
		return nil, nil, fmt.Errorf("plan: seccomp program of %d bytes: %w", len(p.Seccomp), ErrInvalidPlan)
	}
	var e encoder
	e.b = make([]byte, 0, p.sizeHint())
	e.b = binary.NativeEndian.AppendUint32(e.b, nsexec.PlanMagic)
	e.b = binary.NativeEndian.AppendUint32(e.b, nsexec.PlanVersion)
	e.ids(nsexec.TagOuterIDs, p.OuterUID, p.OuterGID)
	e.ids(nsexec.TagInnerIDs, p.InnerUID, p.InnerGID)
	e.record(nsexec.TagNamespaces, binary.NativeEndian.AppendUint64(nil, uint64(p.Namespaces)))
	e.str(nsexec.TagHostname, p.Hostname)
	e.str(nsexec.TagRoot, p.Root)
	e.str(nsexec.TagRootData, p.RootData)
	var trees []*os.File
	for _, m := range p.Mounts {
		if !strings.HasPrefix(m.Target, "/") || strings.Contains(m.Target, "/../") || strings.HasSuffix(m.Target, "/..") {
			return nil, nil, fmt.Errorf("plan: mount target %q: %w", m.Target, ErrInvalidPlan)
		}
		fd := int32(-1)
		if m.Tree != nil {
			fd = int32(nsexec.FDTrees + len(trees))
			trees = append(trees, m.Tree)
		}
		var flags uint16
		if m.Recursive {
			flags |= nsexec.MountRecursive
		}
		e.header(nsexec.TagMount, mountFixed+len(m.Source)+len(m.Target)+len(m.Data))
		e.b = binary.NativeEndian.AppendUint16(e.b, uint16(m.Kind))
		e.b = binary.NativeEndian.AppendUint16(e.b, flags)
		e.b = binary.NativeEndian.AppendUint32(e.b, uint32(fd))
		e.b = binary.NativeEndian.AppendUint64(e.b, m.Attr)
		e.b = binary.NativeEndian.AppendUint32(e.b, m.Mode)
		e.b = binary.NativeEndian.AppendUint32(e.b, uint32(len(m.Source)))
		e.b = append(e.b, m.Source...)
		e.b = binary.NativeEndian.AppendUint32(e.b, uint32(len(m.Target)))
		e.b = append(e.b, m.Target...)
		e.b = binary.NativeEndian.AppendUint32(e.b, uint32(len(m.Data)))
		e.b = append(e.b, m.Data...)
	}
	e.str(nsexec.TagCwd, p.Cwd)
	for _, r := range p.Rlimits {
		v := binary.NativeEndian.AppendUint32(nil, uint32(r.Resource))
		v = binary.NativeEndian.AppendUint64(v, r.Soft)
		v = binary.NativeEndian.AppendUint64(v, r.Hard)
		e.record(nsexec.TagRlimit, v)
	}
	if p.Landlock != 0 {
		e.record(nsexec.TagLandlock, binary.NativeEndian.AppendUint64(nil, p.Landlock))
	}
	if len(p.LandlockPaths) > 0 && p.LandlockFS == 0 {
		return nil, nil, fmt.Errorf("plan: Landlock paths without handled accesses: %w", ErrInvalidPlan)
	}
	if p.LandlockFS != 0 {
		e.record(nsexec.TagLandlockFS, binary.NativeEndian.AppendUint64(nil, p.LandlockFS))
	}
	for _, l := range p.LandlockPaths {
		if !strings.HasPrefix(l.Path, "/") || strings.IndexByte(l.Path, 0) >= 0 || l.Access&^p.LandlockFS != 0 {
			return nil, nil, fmt.Errorf("plan: Landlock path %q, access %#x of %#x: %w", l.Path, l.Access, p.LandlockFS, ErrInvalidPlan)
		}
		e.header(nsexec.TagLandlockPath, 8+len(l.Path))
		e.b = binary.NativeEndian.AppendUint64(e.b, l.Access)
		e.b = append(e.b, l.Path...)
	}
	if len(p.Seccomp) > 0 {
		e.record(nsexec.TagSeccomp, p.Seccomp)
	}
	if len(p.CgroupTasks) > nsexec.PlanMaxCgroups {
		return nil, nil, fmt.Errorf("plan: %d cgroups: %w", len(p.CgroupTasks), ErrInvalidPlan)
	}
	for _, f := range p.CgroupTasks {
		e.record(nsexec.TagCgroupTasks, binary.NativeEndian.AppendUint32(nil, uint32(nsexec.FDTrees+len(trees))))
		trees = append(trees, f)
	}
	e.str(nsexec.TagExe, p.Exe)
	for _, a := range p.Args {
		e.text(nsexec.TagArg, a)
	}
	for _, v := range p.Env {
		e.text(nsexec.TagEnv, v)
	}
	if e.items > nsexec.PlanMaxItems || len(e.b) > nsexec.PlanMax {
		return nil, nil, fmt.Errorf("plan: %d records, %d bytes: %w", e.items, len(e.b), ErrInvalidPlan)
	}
	return e.b, trees, nil
}

// mountFixed is a mount record's fixed part: kind, flags, tree fd, attr,
// mode and the three lengths.
const mountFixed = 2 + 2 + 4 + 8 + 4 + 3*4

// sizeHint is about the encoded plan's size, so that the encoding is
// built in one buffer, without growing it: a record's header, its value
// and a margin for the fixed records.
func (p *Plan) sizeHint() int {
	const rec = 8
	n := 256 + len(p.Hostname) + len(p.Root) + len(p.RootData) + len(p.Cwd) + len(p.Exe) + len(p.Seccomp)
	for _, m := range p.Mounts {
		n += rec + mountFixed + len(m.Source) + len(m.Target) + len(m.Data)
	}
	for _, l := range p.LandlockPaths {
		n += rec + 8 + len(l.Path)
	}
	for _, a := range p.Args {
		n += rec + len(a)
	}
	for _, v := range p.Env {
		n += rec + len(v)
	}
	return n + len(p.Rlimits)*(rec+20) + len(p.CgroupTasks)*(rec+4)
}

type encoder struct {
	b     []byte
	items int
}

// header starts a record of n bytes of value.
func (e *encoder) header(tag uint16, n int) {
	e.b = binary.NativeEndian.AppendUint16(e.b, tag)
	e.b = binary.NativeEndian.AppendUint16(e.b, 0)
	e.b = binary.NativeEndian.AppendUint32(e.b, uint32(n))
	e.items++
}

func (e *encoder) record(tag uint16, v []byte) {
	e.header(tag, len(v))
	e.b = append(e.b, v...)
}

// text is a record of s, copied once.
func (e *encoder) text(tag uint16, s string) {
	e.header(tag, len(s))
	e.b = append(e.b, s...)
}

func (e *encoder) str(tag uint16, s string) {
	if s != "" {
		e.text(tag, s)
	}
}

func (e *encoder) ids(tag uint16, uid, gid uint32) {
	v := binary.NativeEndian.AppendUint32(nil, uid)
	e.record(tag, binary.NativeEndian.AppendUint32(v, gid))
}

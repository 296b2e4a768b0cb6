//go:build linux && cgo

package container

import (
	"fmt"

	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/internal/resources"
)

// maskedPaths are hidden behind /dev/null (runc's list, as containerd and
// docker use it); readonlyPaths are mounted read-only.
var (
	maskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// preloadList is the dynamic loader's list of objects to load into every
// program it starts. An empty one of psych's is bound over the image's: the
// loader that starts psych's init (the host's own, run from /.psych/boot)
// reads /etc/ld.so.preload of the root it runs in, whatever its options.
const preloadList = "/etc/ld.so.preload"

// etcTargets are the /etc files psych binds over the image's: the
// sandbox's (resources.EtcFiles) and an empty preloadList.
func etcTargets() []string {
	var out []string
	for _, f := range resources.EtcFiles() {
		out = append(out, f.Path)
	}
	return append(out, preloadList)
}

// tmpfsOptions are the options of a capped tmpfs.
func tmpfsOptions(bytes, inodes int64, noexec bool) []string {
	o := []string{"nosuid", "nodev", "mode=1777", fmt.Sprintf("size=%d", bytes), fmt.Sprintf("nr_inodes=%d", inodes)}
	if noexec {
		o = append(o, "noexec")
	}
	return o
}

// fillSpec writes psych's hardening over an OCI spec: whatever other
// options set before, these fields are psych's. The mounts are built from
// nothing: a fresh /proc with runc's masked and read-only paths, a /dev of
// runc's default devices, capped /tmp and /dev/shm tmpfs, psych's files
// read-only; no /sys and no cgroup file system.
func fillSpec(s *specs.Spec, rs *runSpec) {
	s.Process = &specs.Process{
		Args:            rs.args,
		Env:             rs.env,
		Cwd:             sandbox.WorkDir,
		User:            specs.User{UID: rs.uid, GID: rs.gid},
		NoNewPrivileges: true,
		Capabilities:    &specs.LinuxCapabilities{},
		Rlimits:         rs.rlimits,
	}
	if s.Root == nil {
		s.Root = &specs.Root{Path: "rootfs"}
	}
	s.Root.Readonly = true
	s.Hostname = resources.Hostname
	s.Domainname = ""
	s.Mounts = []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: tmpfsOptions(rs.tmpBytes/4, rs.tmpInodes, true)},
		{Destination: "/tmp", Type: "bind", Source: rs.tmpDir, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
		{Destination: sandbox.WorkDir, Type: "bind", Source: rs.workDir, Options: []string{"rbind", "rw", "nosuid", "nodev"}},
	}
	for _, b := range rs.binds {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: b.target, Type: "bind", Source: b.source,
			Options: []string{"rbind", "ro", "nosuid", "nodev"}})
	}
	if s.Linux == nil {
		s.Linux = &specs.Linux{}
	}
	l := s.Linux
	l.Namespaces = []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}, {Type: specs.CgroupNamespace}}
	if !rs.network {
		l.Namespaces = append(l.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	l.UIDMappings, l.GIDMappings = nil, nil
	if len(rs.uidMap) > 0 {
		l.Namespaces = append(l.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		l.UIDMappings, l.GIDMappings = rs.uidMap, rs.gidMap
	}
	l.MaskedPaths, l.ReadonlyPaths = maskedPaths, readonlyPaths
	l.Seccomp = rs.seccomp
	l.Sysctl = nil
	l.Devices = nil
	l.IntelRdt = nil
	swap := rs.memoryBytes
	l.Resources = &specs.LinuxResources{
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		Memory:  &specs.LinuxMemory{Limit: &rs.memoryBytes, Swap: &swap},
		Pids:    &specs.LinuxPids{Limit: &rs.pids},
	}
	s.Annotations = nil
	s.Hooks = nil
}

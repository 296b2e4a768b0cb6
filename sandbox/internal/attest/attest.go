package attest

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// NamespaceKinds are the namespaces an attestation compares with the host's.
var namespaceKinds = []string{"user", "mnt", "net", "pid", "ipc", "uts", "cgroup"}

// HostNamespaces reads this process's own namespace links; read it once.
func HostNamespaces() map[string]string {
	m := map[string]string{}
	for _, ns := range namespaceKinds {
		if l, err := os.Readlink("/proc/self/ns/" + ns); err == nil {
			m[ns] = l
		}
	}
	return m
}

// Namespaces lists, in a fixed order, the namespaces of pid that differ from
// host's (from HostNamespaces). It is never nil.
func Namespaces(pid int, host map[string]string) []string {
	out := []string{}
	for _, ns := range namespaceKinds {
		mine := host[ns]
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if mine != "" && err == nil && mine != theirs {
			out = append(out, ns)
		}
	}
	return out
}

// AttestProcesses fills what iso reads from the kernel about the run's init
// and interpreter: their status, the interpreter's namespaces against the
// host's, its maps (inside a user namespace), rlimits and root mount. A
// zero interpPID reads the init alone.
func AttestProcesses(iso *sandbox.Isolation, initPID, interpPID int, hostNS map[string]string) {
	iso.Init = ReadStatus(initPID)
	if interpPID == 0 {
		return
	}
	iso.Interpreter = ReadStatus(interpPID)
	iso.Namespaces = Namespaces(interpPID, hostNS)
	if slices.Contains(iso.Namespaces, "user") {
		iso.UIDMap = ReadMap(interpPID, "uid_map")
		iso.GIDMap = ReadMap(interpPID, "gid_map")
	}
	iso.Limits = ReadLimits(interpPID)
	iso.RootMount = RootMount(interpPID)
}

// ReadMap reads /proc/PID/uid_map or gid_map, one "inside outside count"
// line each, spaces collapsed; empty when it cannot be read.
func ReadMap(pid int, name string) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

// ReadStatus reads the security fields of /proc/PID/status. A field it
// cannot read stays at its "unknown" value: -1 for the numbers, empty for
// the rest.
func ReadStatus(pid int) sandbox.ProcessStatus {
	st := sandbox.ProcessStatus{Seccomp: -1, NoNewPrivs: -1}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st
	}
	return parseStatus(b, st)
}

func parseStatus(b []byte, st sandbox.ProcessStatus) sandbox.ProcessStatus {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Uid":
			st.UID = ints(v)
		case "Gid":
			st.GID = ints(v)
		case "Seccomp":
			st.Seccomp, _ = strconv.Atoi(v)
		case "Seccomp_filters":
			st.SeccompFilters, _ = strconv.Atoi(v)
		case "NoNewPrivs":
			st.NoNewPrivs, _ = strconv.Atoi(v)
		case "CapEff":
			st.CapEff = v
		case "CapBnd":
			st.CapBnd = v
		}
	}
	return st
}

// PPid reads the parent pid from /proc/PID/status; 0 when unknown.
func PPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// limitNames are the /proc/PID/limits rows an attestation shows, by the
// short names it shows them under.
var limitNames = map[string]string{
	"Max cpu time": "cpu", "Max address space": "as", "Max file size": "fsize",
	"Max processes": "nproc", "Max open files": "nofile", "Max stack size": "stack",
	"Max core file size": "core",
}

// ReadLimits reads pid's rlimits from /proc/PID/limits as "soft hard" by
// short name (cpu, as, fsize, nproc, nofile, stack, core); nil when it
// cannot be read.
func ReadLimits(pid int) map[string]string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return nil
	}
	return parseLimits(b)
}

func parseLimits(b []byte) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		for long, short := range limitNames {
			if rest, ok := strings.CutPrefix(l, long); ok {
				if f := strings.Fields(rest); len(f) >= 2 {
					out[short] = f[0] + " " + f[1]
				}
			}
		}
	}
	return out
}

// RootMount describes the mount pid sees as its root, from
// /proc/PID/mountinfo: "own:FSTYPE" for a root of its own, "host:FSTYPE"
// when it is this process's root too; empty when it cannot be read.
func RootMount(pid int) string {
	theirs := readRootMount(fmt.Sprintf("/proc/%d/mountinfo", pid))
	id, fstype, ok := strings.Cut(theirs, ":")
	if !ok {
		return ""
	}
	if hostRootMount() == id {
		return "host:" + fstype
	}
	return "own:" + fstype
}

// hostRootMount is the id of this process's own root mount, learnt once
// (a host does not pivot_root under its runs): statx's mount id of "/"
// where the kernel gives one (5.8), else the mountinfo line.
var hostRootMount = sync.OnceValue(func() string {
	if id, ok := rootMountID(); ok {
		return id
	}
	id, _, _ := strings.Cut(readRootMount("/proc/self/mountinfo"), ":")
	return id
})

func readRootMount(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return parseRootMount(b)
}

// Readback reads what AttestProcesses read into iso once more, for a pooled
// sandbox at dispatch, and names the first field that no longer reads back
// the same; "" when all do.
func Readback(iso *sandbox.Isolation, initPID, interpPID int, hostNS map[string]string) string {
	var now sandbox.Isolation
	AttestProcesses(&now, initPID, interpPID, hostNS)
	switch {
	case !slices.Equal(now.Namespaces, iso.Namespaces):
		return "namespaces"
	case now.UIDMap != iso.UIDMap || now.GIDMap != iso.GIDMap:
		return "id maps"
	case !reflect.DeepEqual(now.Init, iso.Init):
		return "the init's status"
	case !reflect.DeepEqual(now.Interpreter, iso.Interpreter):
		return "the interpreter's status"
	case !maps.Equal(now.Limits, iso.Limits):
		return "rlimits"
	case now.RootMount != iso.RootMount:
		return "root mount"
	}
	return ""
}

// ProcessCPU is the CPU time pid has used (utime and stime of
// /proc/PID/stat, its threads included).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	// After the command: state is field 3, utime 14 and stime 15.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// userHZ is the unit of /proc's clock ticks, fixed at 100 on Linux.
const userHZ = 100

// Nodename is the node name of this host process (uname's nodename in its
// UTS namespace: a pod's name in Kubernetes); empty when it cannot be read.
func Nodename() string {
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	return name
}

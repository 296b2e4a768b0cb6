package host

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

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

//go:build linux && cgo

package doctor

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/psych-runtime/psych/internal/reexec"
	"github.com/psych-runtime/psych/seccomp"
)

// probeUserns is psych's own probe, the one subprocess.New makes: as
// uid/gid, unshare a user namespace and a mount namespace in it.
func probeUserns(uid, gid uint32) (bool, error) {
	ok, _, err := reexec.Probe(uid, gid)
	return ok, err
}

// checkSeccomp checks the kernel's filter mode and the actions psych's filter
// returns, libseccomp, and that psych's filter compiles here.
func checkSeccomp() Check {
	c := Check{Name: "seccomp"}
	for _, a := range []struct {
		name string
		ret  uint32
	}{{"kill_process", unix.SECCOMP_RET_KILL_PROCESS}, {"errno", unix.SECCOMP_RET_ERRNO}} {
		ret := a.ret
		if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&ret))); errno != 0 {
			c.Status = Fail
			c.Found = fmt.Sprintf("the kernel's seccomp filter mode lacks the %s action: seccomp(SECCOMP_GET_ACTION_AVAIL): %s", a.name, describe(errno))
			c.Fix = "use a kernel built with CONFIG_SECCOMP_FILTER (Linux 4.14 or later)"
			return c
		}
	}
	major, minor, micro := libseccomp.GetLibraryVersion()
	lib := fmt.Sprintf("libseccomp %d.%d.%d", major, minor, micro)
	if api, err := libseccomp.GetAPI(); err == nil {
		lib += fmt.Sprintf(" (API level %d)", api)
	}
	f, err := seccomp.DefaultFilter()
	if err != nil {
		c.Status = Fail
		c.Found = fmt.Sprintf("kernel filter mode present; %s; psych's filter does not compile: %v", lib, err)
		c.Fix = "install libseccomp 2.5 or later (apt-get install libseccomp-dev) and rebuild psych"
		return c
	}
	c.Status = OK
	c.Found = fmt.Sprintf("kernel filter mode with kill_process and errno; %s; psych's filter compiles: %d instructions, %s", lib, f.Len(), f.Digest())
	if n := len(f.Unresolved()); n > 0 {
		c.Found += fmt.Sprintf("; %d of its names are not in this libseccomp's x86_64 table (newer syscalls among them fail with ENOSYS)", n)
	}
	if mode, filters := selfSeccomp(); mode == "2" {
		c.Found += fmt.Sprintf("; psych itself runs under %s filter(s) already (a container's?), stacked under psych's", filters)
	}
	return c
}

// selfSeccomp reads this process's Seccomp and Seccomp_filters fields.
func selfSeccomp() (mode, filters string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "Seccomp":
			mode = strings.TrimSpace(v)
		case "Seccomp_filters":
			filters = strings.TrimSpace(v)
		}
	}
	return mode, filters
}

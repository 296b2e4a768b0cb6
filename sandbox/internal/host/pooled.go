package host

import (
	"fmt"

	"github.com/psych-runtime/psych/cgroups"
	"github.com/psych-runtime/psych/sandbox"
)

// Pooled is a sandbox of a warm pool as the core checks it at dispatch.
type Pooled struct {
	// Isolation is the attestation read when the sandbox was started.
	Isolation          *sandbox.Isolation
	InitPID, InterpPID int
	HostNS             map[string]string
	// Netlink is a NETLINK_ROUTE socket in the sandbox's network
	// namespace, kept since its start; BeforeCheck (a test hook) runs on
	// it first.
	Netlink     int
	BeforeCheck func(fd int) error
	Cgroup      *cgroups.Run
}

// CheckPooled refuses a pooled sandbox that no longer reads back as it was
// started: its attestation (Readback), its network namespace (the check
// again: lo alone), or its cgroup (an OOM kill, a refused fork). They are
// read one after the other: side by side on goroutines of their own they
// were slower here (two CPUs, and threads to wake). On success it returns
// the network check, for the run's attestation.
func CheckPooled(p Pooled) (*sandbox.NetworkCheck, error) {
	if what := Readback(p.Isolation, p.InitPID, p.InterpPID, p.HostNS); what != "" {
		return nil, fmt.Errorf("its attestation no longer reads back the same: %s", what)
	}
	if p.BeforeCheck != nil {
		if err := p.BeforeCheck(p.Netlink); err != nil {
			return nil, err
		}
	}
	nc, err := CheckNetwork(p.Netlink, nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("network check: %w", err)
	case !nc.Verified:
		return nil, fmt.Errorf("its network namespace no longer passes the check: %s", nc.Reason)
	}
	oom, refused, err := p.Cgroup.Events()
	switch {
	case err != nil:
		return nil, err
	case oom > 0 || refused > 0:
		return nil, fmt.Errorf("its cgroup recorded %d OOM kills and %d refused forks", oom, refused)
	}
	return nc, nil
}

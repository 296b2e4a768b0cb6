package host

import (
	"errors"
	"fmt"
	"sync"

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
// again: lo alone), or its cgroup (no CPU usage kept, an OOM kill, a
// refused fork). The three are read side by side. On success it returns
// the network check, for the run's attestation.
func CheckPooled(p Pooled) (*sandbox.NetworkCheck, error) {
	var readErr, netErr error
	var nc *sandbox.NetworkCheck
	var wg sync.WaitGroup
	wg.Go(func() {
		if what := Readback(p.Isolation, p.InitPID, p.InterpPID, p.HostNS); what != "" {
			readErr = fmt.Errorf("its attestation no longer reads back the same: %s", what)
		}
	})
	wg.Go(func() {
		if p.BeforeCheck != nil {
			if netErr = p.BeforeCheck(p.Netlink); netErr != nil {
				return
			}
		}
		if nc, netErr = CheckNetwork(p.Netlink, nil); netErr != nil {
			netErr = fmt.Errorf("network check: %w", netErr)
		} else if !nc.Verified {
			netErr = fmt.Errorf("its network namespace no longer passes the check: %s", nc.Reason)
		}
	})
	st, cgErr := p.Cgroup.Stats()
	switch {
	case cgErr != nil:
	case !st.CPUKnown:
		cgErr = errors.New("its cgroup keeps no CPU usage")
	case st.OOMKills > 0 || st.PidsMaxEvents > 0:
		cgErr = fmt.Errorf("its cgroup recorded %d OOM kills and %d refused forks", st.OOMKills, st.PidsMaxEvents)
	}
	wg.Wait()
	if err := errors.Join(readErr, netErr, cgErr); err != nil {
		return nil, err
	}
	return nc, nil
}

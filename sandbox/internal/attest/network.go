package attest

import (
	"github.com/psych-runtime/psych/netns"
	"github.com/psych-runtime/psych/sandbox"
)

// CheckNetwork verifies, through a NETLINK_ROUTE socket opened inside a
// run's network namespace, that the namespace holds nothing but loopback
// (package netns), and shapes the outcome for the attestation: Verified only
// when every check passed, the reason otherwise. before, a test's hook, runs
// on the socket first; its error is returned as is.
func CheckNetwork(fd int, before func(fd int) error) (*sandbox.NetworkCheck, error) {
	if before != nil {
		if err := before(fd); err != nil {
			return nil, err
		}
	}
	check, err := netns.Verify(fd)
	nc := &sandbox.NetworkCheck{Verified: err == nil && check.Denied, Reason: check.Reason}
	for _, l := range check.Links {
		nc.Links = append(nc.Links, l.Name)
	}
	if err != nil {
		nc.Reason = err.Error()
	}
	return nc, nil
}

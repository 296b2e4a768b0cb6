package cgroups

import "strings"

// parseRunName reads the owner from a run cgroup's name, "PID.START-RUNID".
// Any other name is not a run cgroup.
func parseRunName(name string) (Owner, bool) {
	head, id, ok := strings.Cut(name, "-")
	if !ok || validRunID(id) != nil {
		return Owner{}, false
	}
	return ParseOwner(head)
}

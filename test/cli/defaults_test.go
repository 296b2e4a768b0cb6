package cli

import (
	"testing"

	command "github.com/psych-runtime/psych/internal/cli"
	"github.com/psych-runtime/psych/sandbox/container"
)

// TestDefaultsAgree: the flags' help in psych (which cannot link the
// container package) names the container backend's real defaults.
func TestDefaultsAgree(t *testing.T) {
	if command.DefaultImage != container.DefaultImage || command.DefaultContainerPython != container.DefaultContainerPython {
		t.Fatalf("internal/cli says %q, %q; sandbox/container says %q, %q",
			command.DefaultImage, command.DefaultContainerPython, container.DefaultImage, container.DefaultContainerPython)
	}
}

package server

import (
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
)

// TestMain dispatches the re-exec helpers registered by this package's
// tests (testutil.Register) before running the tests.
func TestMain(m *testing.M) { testutil.Main(m) }

package server

import (
	"fmt"
	"os"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
)

// TestMain dispatches the re-exec helpers registered by this package's
// tests (testutil.Register) before running the tests; after them, every
// status the API's handlers answered must be one api/openapi.yaml
// documents for its route.
func TestMain(m *testing.M) {
	if _, helper := os.LookupEnv(testutil.HelperEnv); helper {
		testutil.Main(m)
	}
	code := m.Run()
	if code == 0 {
		doc, err := parseOpenAPI()
		if err == nil {
			if bad := undocumentedStatuses(doc); len(bad) > 0 {
				err = fmt.Errorf("statuses the handlers answered that api/openapi.yaml does not document: %v", bad)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: TestMain:", err)
			code = 1
		}
	}
	os.Exit(code)
}

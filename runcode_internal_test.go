package psych

import "testing"

// TestRunCodeSchemaCompiles: run_code is compiled on first use, so a
// broken schema would show only there; here it shows at once.
func TestRunCodeSchemaCompiles(t *testing.T) {
	r := &Runtime{reg: NewRegistry()}
	if _, err := compile(r.runCodeSpec()); err != nil {
		t.Fatal(err)
	}
}

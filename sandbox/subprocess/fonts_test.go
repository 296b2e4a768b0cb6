//go:build linux && cgo

package subprocess

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
)

// TestViewFontconfig: fontconfig's settings are in the view, so fc-list
// (which matplotlib runs when it builds a font list of its own) finds the
// host's fonts in a run and prints no "Fontconfig error".
func TestViewFontconfig(t *testing.T) {
	fcList, err := exec.LookPath("fc-list")
	if _, serr := os.Stat(fontconfigEtc); err != nil || serr != nil || !strings.HasPrefix(fcList, "/usr/") {
		testutil.Unavailable(t, "this host has no fontconfig in /usr and /etc/fonts: %v %v", err, serr)
	}
	s := newTestSandbox(t, Config{})
	res, err := s.Run(context.Background(), sandbox.Request{Code: "import subprocess\n" +
		"p = subprocess.run(['" + fcList + "', '--format', '%{file}\\n'], capture_output=True, text=True)\n" +
		"p.returncode, p.stdout.count('\\n'), p.stderr"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		status, fonts int
		stderr        string
	}
	if res.Failure == nil {
		err = json.Unmarshal(res.Value, &[]any{&got.status, &got.fonts, &got.stderr})
	}
	if res.Failure != nil || err != nil || got.status != 0 || got.fonts == 0 || got.stderr != "" {
		t.Fatalf("fc-list in a run: %s (want status 0, fonts, nothing on stderr); failure %+v, stderr %s", res.Value, res.Failure, res.Stderr)
	}
}

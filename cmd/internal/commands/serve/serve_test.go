package serve

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/cli"
)

// TestRefusedBeforeServing: what psych serve refuses it refuses at once,
// exit 2, before it makes a sandbox: a TCP listener without a token, a
// negative bound, an address it does not understand, an argument, a
// module to preload without a pool or that is no module name, a token
// file its group may read.
func TestRefusedBeforeServing(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	os.WriteFile(token, []byte("0123456789abcdef\n"), 0o600)
	shared := filepath.Join(t.TempDir(), "shared")
	os.WriteFile(shared, []byte("0123456789abcdef\n"), 0o600)
	os.Chmod(shared, 0o640)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "tcp://127.0.0.1:0"}, "needs --token-file"},
		{[]string{"--listen", "tls://127.0.0.1:0", "--token-file", token}, "certificate"},
		{[]string{"--listen", "http://127.0.0.1:80"}, "--listen"},
		{[]string{"--listen", "unix://relative.sock"}, "--listen"},
		{[]string{"--max-runs", "-1"}, "--max-runs: must not be negative"},
		{[]string{"--queue-timeout", "-1s"}, "--queue-timeout: must not be negative"},
		{[]string{"--token-file", "/nonexistent/token"}, "--token-file"},
		{[]string{"--listen", "tcp://127.0.0.1:0", "--token-file", shared}, "its group may read or write it"},
		{[]string{"--metrics-listen", "tls://127.0.0.1:0", "--listen", "unix://" + filepath.Join(t.TempDir(), "s.sock")}, "--metrics-listen"},
		{[]string{"extra"}, "takes no arguments"},
		{[]string{"--preload", "pandas"}, "--preload needs --pool"},
		{[]string{"--pool", "1", "--preload", "pandas,os;x"}, `--preload: pool preload "os;x": not a module name`},
	} {
		var stderr bytes.Buffer
		if got := command(tc.args, &stderr); got != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("psych serve %v: exit %d, %q; want %d and %q", tc.args, got, stderr.String(), cli.ExitUsage, tc.want)
		}
	}
}

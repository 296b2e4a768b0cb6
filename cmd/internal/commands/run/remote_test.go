package run

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/internal/cli"
)

// scripted serves h on a Unix socket and returns its address.
func scripted(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix://" + sock
}

func refuse(status int, code string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(status)
		io.WriteString(w, `{"error":{"code":"`+code+`","message":"scripted"}}`)
	}
}

const result = `{"id":"r1","stdout":"hi\n","stderr":"","stdout_truncated":false,"stderr_truncated":false,"value":[1,2],"failure":null,"limit_hit":null,"network_denied":true,"usage":null,"isolation":null,"duration_seconds":0.5,"suspended_seconds":0}`

// TestRemoteExitCodes: through a server, a Result prints as locally, and a
// refusal picks the exit code the issue gives it.
func TestRemoteExitCodes(t *testing.T) {
	var gotAuth, gotBody string
	ok := func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "" {
			gotAuth, gotBody = r.Header.Get("Authorization"), string(b)
		}
		w.Header().Set("Content-Type", api.MediaNDJSON)
		io.WriteString(w, `{"event":"started","id":"r1"}`+"\n"+`{"event":"stdout","data":"hi\n"}`+"\n"+`{"event":"result","result":`+result+`}`+"\n")
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("tok3n-0123456789\n"), 0o600)
	shared := filepath.Join(t.TempDir(), "shared")
	os.WriteFile(shared, []byte("tok3n-0123456789\n"), 0o600)
	os.Chmod(shared, 0o644)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PSYCH_CL_TEST", "from-env")
	for _, tc := range []struct {
		name   string
		h      http.HandlerFunc
		args   []string
		want   int
		stdout string
		stderr string
	}{
		{"json", ok, []string{"--json", "--token-file", tokenFile, "--env", "PSYCH_CL_TEST", "--env", "B=c", "--cpu-seconds", "3"}, cli.ExitOK, result + "\n", ""},
		{"token file others read", ok, []string{"--token-file", shared}, cli.ExitUsage, "", "others may read or write it"},
		{"token file a FIFO", ok, []string{"--token-file", fifo}, cli.ExitUsage, "", "not a regular file"},
		{"text", ok, nil, cli.ExitOK, "hi\n[1,2]\n", "psych: ok in 0.500s"},
		{"429", refuse(429, api.CodeCapacityExhausted), nil, cli.ExitRetry, "", "retry after 2s"},
		{"503", refuse(503, api.CodeDraining), nil, cli.ExitRetry, "", "draining"},
		{"400", refuse(400, api.CodeInvalidRequest), nil, cli.ExitUsage, "", "invalid_request"},
		{"401", refuse(401, api.CodeUnauthorized), nil, cli.ExitUsage, "", "unauthorized"},
		{"403", refuse(403, api.CodeForbidden), nil, cli.ExitUsage, "", "forbidden"},
		{"500", refuse(500, api.CodeHostFault), nil, cli.ExitHostFault, "", "host_fault"},
		{"no terminal event", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", api.MediaNDJSON)
			io.WriteString(w, `{"event":"started","id":"r1"}`+"\n")
		}, nil, cli.ExitHostFault, "", "terminal"},
		{"python", ok, []string{"--python", "/usr/bin/python3"}, cli.ExitUsage, "", "--python with --host"},
		{"store", ok, []string{"--store", "x.db"}, cli.ExitUsage, "", "--store with --host"},
		{"demo tools", ok, []string{"--demo-tools"}, cli.ExitUsage, "", "--demo-tools with --host"},
		{"backend", ok, []string{"--backend", "subprocess"}, cli.ExitUsage, "", "--backend with --host"},
		{"max output", ok, []string{"--max-output", "1KiB"}, cli.ExitUsage, "", "--max-output with --host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := scripted(t, tc.h)
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"--host", host}, tc.args...), "-")
			got := run(Config{}, args, strings.NewReader("print('hi')\n[1,2]"), &stdout, &stderr)
			if got != tc.want || stdout.String() != tc.stdout && tc.stdout != "" || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", got, stdout.String(), stderr.String(), tc.want, tc.stdout, tc.stderr)
			}
		})
	}
	if gotAuth != "Bearer tok3n-0123456789" || !strings.Contains(gotBody, `"env":{"B":"c","PSYCH_CL_TEST":"from-env"}`) || !strings.Contains(gotBody, `"cpu_seconds":3`) {
		t.Errorf("the json case sent %q, %s", gotAuth, gotBody)
	}

	// An unreachable server is a host fault; PSYCH_HOST stands for --host.
	t.Setenv("PSYCH_HOST", "unix:///nonexistent/psych.sock")
	var stderr bytes.Buffer
	if got := run(Config{}, []string{"-"}, strings.NewReader("1"), io.Discard, &stderr); got != cli.ExitHostFault || !strings.Contains(stderr.String(), "unreachable") {
		t.Errorf("unreachable PSYCH_HOST: exit %d, %s", got, stderr.String())
	}
}

package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

func TestApproveFlag(t *testing.T) {
	code := "try:\n    r = remove_file('notes.txt')\nexcept BindingError as e:\n    r = 'BindingError: ' + str(e)\nr"
	for _, tc := range []struct{ approve, want string }{
		{"no", "BindingError: denied by policy"},
		{"yes", "removed notes.txt"},
	} {
		res := runJSON(t, code, "--demo-tools", "--approve", tc.approve)
		var v string
		json.Unmarshal(res.Value, &v)
		if !strings.HasPrefix(v, tc.want) {
			t.Errorf("--approve %s: %q, want %q", tc.approve, v, tc.want)
		}
	}
	// The demo directory is remove_file's only reach.
	res := runJSON(t, "try:\n    r = remove_file('../../etc/hostname')\nexcept BindingError as e:\n    r = str(e)\nr", "--demo-tools", "--approve", "yes")
	if v := string(res.Value); !strings.Contains(v, "remove_file") || strings.Contains(v, "removed") {
		t.Fatalf("remove_file outside its directory: %s", v)
	}
	// ask without a terminal is a usage error, before anything runs.
	cmd := exec.Command(psychBin, "run", "--python", testPython(), "--demo-tools", "--approve", "ask", "-")
	cmd.Stdin = strings.NewReader("None")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	var e bytes.Buffer
	cmd.Stderr = &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(e.String(), "terminal") {
		t.Fatalf("--approve ask without a terminal: %v, %s", err, e.String())
	}
}

// TestStoreShowReplay: one execution with three binding calls, recorded,
// listed, shown in order and replayed.
func TestStoreShowReplay(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledger.db")
	a, b := time.Now().Nanosecond()%1000, time.Now().Second()
	code := fmt.Sprintf("x = echo(a=%d)\ny = echo(b=%d)\nz = echo(c=x['a'] + y['b'])\nz['c']", a, b)
	res := runJSON(t, code, "--demo-tools", "--store", db)
	if res.Failure != nil || string(res.Value) != fmt.Sprint(a+b) || sandbox.CheckID(res.ID) != nil {
		t.Fatalf("run: id %q value %s failure %+v", res.ID, res.Value, res.Failure)
	}
	out, errOut, code2 := cli(t, "", "runs", "list", "--store", db)
	if code2 != 0 || !strings.Contains(out, res.ID) || !strings.Contains(out, "ok") {
		t.Fatalf("runs list: %d %s %s", code2, out, errOut)
	}
	out, errOut, code2 = cli(t, "", "runs", "show", "--json", "--store", db, res.ID)
	if code2 != 0 {
		t.Fatalf("runs show: %d %s", code2, errOut)
	}
	var shown struct {
		Status string
		Calls  []struct {
			Seq               int64
			Tool, Via, Parent string
			Args              map[string]int
			Decision          string
			Outcome           string
			Duration          *float64
		}
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("runs show --json: %v\n%s", err, out)
	}
	want := []map[string]int{{"a": a}, {"b": b}, {"c": a + b}}
	if len(shown.Calls) != 3 || shown.Status != "ok" {
		t.Fatalf("shown %+v", shown)
	}
	for i, c := range shown.Calls {
		if c.Tool != "echo" || c.Via != "run_code" || c.Parent != res.ID || c.Decision != "allow" || c.Outcome != "ok" || c.Duration == nil ||
			fmt.Sprint(c.Args) != fmt.Sprint(want[i]) || i > 0 && c.Seq <= shown.Calls[i-1].Seq {
			t.Fatalf("call %d: %+v, want echo(%v) in order", i, c, want[i])
		}
	}
	out, errOut, code2 = cli(t, "", "runs", "show", "--store", db, res.ID)
	if code2 != 0 || !strings.Contains(out, code) || strings.Count(out, "echo") < 3 {
		t.Fatalf("runs show: %d\n%s%s", code2, out, errOut)
	}
	out, errOut, code2 = cli(t, "", "runs", "replay", "--python", testPython(), "--store", db, res.ID)
	if code2 != 0 || !strings.Contains(out, "reproduced") {
		t.Fatalf("runs replay: %d %s %s", code2, out, errOut)
	}
	if _, _, code2 = cli(t, "", "runs", "show", "--store", db, "nope"); code2 != exitUsage {
		t.Fatalf("runs show of an unknown id: exit %d", code2)
	}
	if _, _, code2 = cli(t, "", "runs", "list", "--store", filepath.Join(t.TempDir(), "none.db")); code2 != exitUsage {
		t.Fatalf("runs list of a missing store: exit %d", code2)
	}
}

// TestStoreSurvivesHostKill: a psych run SIGKILLed mid-run leaves a store
// that opens, lists the run as incomplete and shows the calls it committed.
func TestStoreSurvivesHostKill(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledger.db")
	cmd := exec.Command(psychBin, "run", "--python", testPython(), "--demo-tools", "--store", db, "-")
	cmd.Stdin = strings.NewReader("for i in range(3):\n    echo(i=i)\nsleep(60)")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Wait until the sleep call is in flight: its three echoes are
	// committed by then (the calls are recorded when they end, and the
	// writer commits within milliseconds).
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, _ := cli(t, "", "runs", "list", "--json", "--store", db)
		if strings.Contains(out, "incomplete") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never showed up in the store")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	out, errOut, code := cli(t, "", "runs", "list", "--json", "--store", db)
	var rows []struct{ ID, Status string }
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Status != "incomplete" {
		t.Fatalf("runs list after a SIGKILL: %d %s %s", code, out, errOut)
	}
	out, errOut, code = cli(t, "", "runs", "show", "--json", "--store", db, rows[0].ID)
	var shown struct{ Calls []struct{ Tool string } }
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Calls) != 3 {
		t.Fatalf("runs show after a SIGKILL: %d %s %s", code, out, errOut)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatal(err)
	}
}

// TestReplayDiverges: a program whose arguments differ from run to run
// diverges at its first call; replay exits 1 and prints {seq, want, got}.
func TestReplayDiverges(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ledger.db")
	res := runJSON(t, "import time\necho(n=time.time_ns())", "--demo-tools", "--store", db)
	if res.Failure != nil {
		t.Fatalf("%+v", res.Failure)
	}
	out, errOut, code := cli(t, "", "runs", "replay", "--python", testPython(), "--store", db, res.ID)
	var d struct {
		Seq       int64
		Index     int
		Want, Got struct {
			Tool string
			Args map[string]int64
		}
	}
	if code != exitDiverged || json.Unmarshal([]byte(out), &d) != nil || d.Seq == 0 || d.Index != 1 ||
		d.Want.Tool != "echo" || d.Got.Tool != "echo" || d.Want.Args["n"] == d.Got.Args["n"] {
		t.Fatalf("replay of a changed run: exit %d, %s %s", code, out, errOut)
	}
}

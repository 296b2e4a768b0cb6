package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/store/storetest"
)

var ctx = context.Background()

func open(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) psych.Store { return open(t, filepath.Join(t.TempDir(), "psych.db")) })
}

// rawDB opens the file with no Store in the way; the caller closes it.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// openBeside opens a Store on a new file and, beside it, a handle on the
// same file with no Store in the way; both are closed when the test ends.
func openBeside(t *testing.T) (*Store, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "psych.db")
	s := open(t, path)
	t.Cleanup(func() { s.Close() })
	db := rawDB(t, path)
	t.Cleanup(func() { db.Close() })
	return s, db
}

// raw runs statements on the file with no Store in the way.
func raw(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db := rawDB(t, path)
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psych.db")
	s := open(t, path)
	for _, id := range []string{"done", "running"} {
		if err := s.BeginExecution(ctx, &psych.Execution{ID: id, Code: "print(1)", Started: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	var last int64
	for i := range 10 {
		c := psych.CallRecord{ID: strconv.Itoa(i), Parent: []string{"done", ""}[i%2], Tool: "t", Args: json.RawMessage(`{}`)}
		if err := s.RecordCall(ctx, &c); err != nil {
			t.Fatal(err)
		}
		last = c.Seq
	}
	if err := s.FinishExecution(ctx, "done", &sandbox.Result{Stdout: "1\n", Duration: time.Second}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Executions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	beforeCalls, err := s.Calls(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	defer s.Close()
	after, err := s.Executions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := jsonOf(t, after), jsonOf(t, before); a != b {
		t.Errorf("executions after reopen\n got %s\nwant %s", a, b)
	}
	afterCalls, err := s.Calls(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := jsonOf(t, afterCalls), jsonOf(t, beforeCalls); a != b {
		t.Errorf("calls after reopen\n got %s\nwant %s", a, b)
	}
	c := psych.CallRecord{ID: "next", Parent: "running"}
	if err := s.RecordCall(ctx, &c); err != nil {
		t.Fatal(err)
	}
	if c.Seq != last+1 {
		t.Errorf("first Seq after reopen = %d, want %d", c.Seq, last+1)
	}
	if err := s.FinishExecution(ctx, "running", &sandbox.Result{}); err != nil {
		t.Errorf("finishing after reopen: %v", err)
	}
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "done"}); !errors.Is(err, psych.ErrDuplicateID) {
		t.Errorf("BeginExecution of a reopened id = %v, want ErrDuplicateID", err)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFileSettings(t *testing.T) {
	s, db := openBeside(t)
	for q, want := range map[string]string{
		"PRAGMA journal_mode":   "wal",
		"PRAGMA user_version":   strconv.Itoa(schemaVersion),
		"PRAGMA application_id": strconv.Itoa(applicationID),
	} {
		var got string
		if err := db.QueryRow(q).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", q, got, err, want)
		}
	}
	var sync int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil || sync != 1 {
		t.Errorf("writer's synchronous = %d, %v; want 1 (NORMAL)", sync, err)
	}
	var busy int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil || busy < 1000 {
		t.Errorf("writer's busy_timeout = %d, %v; want ≥ 1000", busy, err)
	}
}

func TestPathNeedsNoEscaping(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a?b#c%20d")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "psych.db")
	s := open(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("store not at its path: %v", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string)
		want error // nil: any error
	}{
		{"text file", func(t *testing.T, path string) { write(t, path, []byte("not a database, just text\n")) }, ErrNotStore},
		{"random bytes", func(t *testing.T, path string) {
			b := make([]byte, 8192)
			for i := range b {
				b[i] = byte(rand.N(256))
			}
			write(t, path, b)
		}, ErrNotStore},
		{"bad header", func(t *testing.T, path string) {
			write(t, path, append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xff}, 4080)...))
		}, nil},
		{"foreign schema", func(t *testing.T, path string) {
			raw(t, path, "CREATE TABLE users (name TEXT)", "INSERT INTO users VALUES ('ann')")
		}, ErrNotStore},
		{"foreign application", func(t *testing.T, path string) {
			raw(t, path, "PRAGMA application_id = 42", "PRAGMA user_version = 1")
		}, ErrNotStore},
		{"newer version", func(t *testing.T, path string) {
			open(t, path).Close()
			raw(t, path, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion+1))
		}, ErrVersion},
		{"unknown version", func(t *testing.T, path string) {
			open(t, path).Close()
			raw(t, path, "PRAGMA user_version = 0")
		}, ErrVersion},
		{"altered schema", func(t *testing.T, path string) {
			open(t, path).Close()
			raw(t, path, "CREATE TRIGGER spy AFTER INSERT ON calls BEGIN SELECT 1; END")
		}, ErrNotStore},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "psych.db")
			tt.make(t, path)
			before, _ := os.ReadFile(path)
			s, err := Open(path)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			t.Log(err)
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Open = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("Open changed the file it refused")
			}
		})
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptPages: a store whose pages were overwritten fails with an
// error, at Open or at the read, and never panics.
func TestCorruptPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psych.db")
	s := open(t, path)
	for i := range 2000 {
		c := psych.CallRecord{ID: strconv.Itoa(i), Tool: "t", Args: json.RawMessage(`{"n":` + strconv.Itoa(i) + `}`)}
		if err := s.RecordCall(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	if len(b) < 8*page {
		t.Fatalf("store is only %d bytes", len(b))
	}
	for i := len(b) / 2; i < len(b); i++ { // the later pages hold calls
		b[i] = 0xa5
	}
	write(t, path, b)
	s, err = Open(path)
	if err != nil {
		t.Logf("Open refused: %v", err)
		return
	}
	defer s.Close()
	if cs, err := s.Calls(ctx, ""); err == nil {
		t.Fatalf("Calls on a corrupt store read %d calls and no error", len(cs))
	} else {
		t.Logf("Calls refused: %v", err)
	}
}

func TestClosed(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "psych.db"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	_, errRead := s.Calls(ctx, "")
	for name, err := range map[string]error{
		"BeginExecution": s.BeginExecution(ctx, &psych.Execution{ID: "x"}),
		"RecordCall":     s.RecordCall(ctx, &psych.CallRecord{}),
		"Calls":          errRead,
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// TestCommitsWithoutReaders: the writer commits queued calls by itself,
// within its delay, with nothing waiting on them.
func TestCommitsWithoutReaders(t *testing.T) {
	s, db := openBeside(t)
	c := psych.CallRecord{ID: "c", Tool: "t"}
	start := time.Now()
	if err := s.RecordCall(ctx, &c); err != nil {
		t.Fatal(err)
	}
	for {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM calls").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			t.Logf("committed after %v", time.Since(start))
			return
		}
		if time.Since(start) > 2*time.Second {
			t.Fatal("a queued call was not committed within 2s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCanceledContextStillWrites: ctx bounds the wait, not the write.
func TestCanceledContextStillWrites(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "psych.db"))
	defer s.Close()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.BeginExecution(canceled, &psych.Execution{ID: "x"}); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("BeginExecution = %v", err)
	}
	c := psych.CallRecord{ID: "c", Parent: "x"}
	if err := s.RecordCall(canceled, &c); err != nil {
		t.Fatalf("RecordCall = %v", err)
	}
	if _, err := s.Execution(ctx, "x"); err != nil {
		t.Errorf("execution begun under a canceled ctx: %v", err)
	}
	if cs, err := s.Calls(ctx, "x"); err != nil || len(cs) != 1 {
		t.Errorf("calls recorded under a canceled ctx: %d, %v", len(cs), err)
	}
	if _, err := s.Calls(canceled, "x"); err == nil {
		t.Error("a read under a canceled ctx succeeded")
	}
}

const crashEnv = "PSYCH_SQLITE_CRASH_STORE"

// TestCrashChild is TestSIGKILL's child: it records calls until killed,
// printing how many Calls read back as committed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("runs only as TestSIGKILL's child")
	}
	s := open(t, path)
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "run", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 200)
	for i := 1; i < 1e7; i++ {
		c := psych.CallRecord{ID: strconv.Itoa(i), Parent: "run", Tool: "t", Args: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))}
		if err := s.RecordCall(ctx, &c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Microsecond) // paced, so the writer's own commits come between reads
		if i%250 == 0 {
			cs, err := s.Calls(ctx, "run")
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("committed %d\n", len(cs))
		}
	}
	t.Fatal("not killed")
}

// TestSIGKILL kills a process mid-run and reads what it left: a store that
// opens, the execution incomplete, and a gap-free prefix of its calls at
// least as long as the child saw committed.
func TestSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psych.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer watchdog.Stop()
	committed, target := 0, 1000+rand.N(2000)
	var other []string
	for sc := bufio.NewScanner(out); committed < target && sc.Scan(); {
		if n, ok := strings.CutPrefix(sc.Text(), "committed "); ok {
			committed, _ = strconv.Atoi(n)
		} else {
			other = append(other, sc.Text())
		}
	}
	time.Sleep(time.Duration(rand.N(30000)) * time.Microsecond) // land anywhere, commits included
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if committed < target {
		t.Fatalf("child reported %d committed calls, want %d\nstdout: %q\nstderr: %s", committed, target, other, stderr.Bytes())
	}

	s := open(t, path)
	defer s.Close()
	e, err := s.Execution(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Incomplete() {
		t.Errorf("killed execution has Result %+v", e.Result)
	}
	cs, err := s.Calls(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) < committed {
		t.Fatalf("read back %d calls, the child saw %d committed", len(cs), committed)
	}
	for i, c := range cs {
		var args struct{ I int }
		if err := json.Unmarshal(c.Args, &args); err != nil || c.Seq != int64(i+1) || c.ID != strconv.Itoa(i+1) || args.I != i+1 {
			t.Fatalf("call %d read back as Seq %d, ID %q, args %s (%v)", i+1, c.Seq, c.ID, c.Args, err)
		}
	}
	t.Logf("child saw %d committed; %d survived the kill", committed, len(cs))
	c := psych.CallRecord{ID: "after", Parent: "run"}
	if err := s.RecordCall(ctx, &c); err != nil || c.Seq != int64(len(cs)+1) {
		t.Errorf("RecordCall after the crash: Seq %d, %v; want %d", c.Seq, err, len(cs)+1)
	}
}

func BenchmarkRecordCall(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	args := json.RawMessage(`{"query":"benchmark","limit":10}`)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := psych.CallRecord{ID: "c", Parent: "bench", Tool: "search", Args: args, Via: psych.ViaRunCode,
				Decision: psych.Allow, Started: time.Now(), Outcome: psych.OutcomeOK, Value: args}
			if err := s.RecordCall(ctx, &c); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := s.Close(); err != nil { // committing is part of the cost
		b.Fatal(err)
	}
}

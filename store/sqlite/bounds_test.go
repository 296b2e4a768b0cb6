package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
)

// TestMigrateVersion1: a ledger written by version 1 (no record-cap
// columns) opens, keeps its calls, takes the new columns and reads the
// same as a new store afterwards.
func TestMigrateVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psych.db")
	raw(t, path, append(append([]string(nil), schema...),
		fmt.Sprintf("PRAGMA application_id = %d", applicationID), "PRAGMA user_version = 1",
		`INSERT INTO executions (id, call_id, code, limits, network, bindings, backend, engine, interpreter, image, env_keys) VALUES ('old', '', 'x', '{}', 0, '[]', '', '', '', '', '[]')`,
		`INSERT INTO calls (seq, id, parent, tool, args, via, decision, reason, approver, decision_ns, duration_ns, outcome, error, bytes_in, bytes_out) VALUES (1, 'c1', 'old', 'echo', CAST('{"a":1}' AS BLOB), 'run_code', 'allow', '', '', 0, 0, 'ok', '', 7, 0)`)...)
	s := open(t, path)
	calls, err := s.Calls(ctx, "old")
	if err != nil || len(calls) != 1 || string(calls[0].Args) != `{"a":1}` || calls[0].ArgsTruncated {
		t.Fatalf("the old call reads back as %+v, %v", calls, err)
	}
	rec := &psych.CallRecord{ID: "c2", Parent: "old", Tool: "echo", Args: json.RawMessage(`"{\"a\":"`), ArgsTruncated: true, ArgsSHA256: strings.Repeat("0", 64), BytesIn: 1 << 20}
	if err := s.RecordCall(ctx, rec); err != nil || rec.Seq != 2 {
		t.Fatalf("record after migrating: seq %d, %v", rec.Seq, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path) // the migrated file is a current one
	defer s.Close()
	calls, err = s.Calls(ctx, "old")
	if err != nil || len(calls) != 2 || !calls[1].ArgsTruncated || calls[1].ArgsSHA256 != rec.ArgsSHA256 {
		t.Fatalf("after reopening: %+v, %v", calls, err)
	}
	var v int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Errorf("user_version %d, %v; want %d", v, err, schemaVersion)
	}
}

// TestMigrateStatus: a ledger written by version 1 or 2 (no status
// column) opens with its executions finished where they have a result and
// incomplete where not, and records an end without a result afterwards,
// which a reopened store reads back.
func TestMigrateStatus(t *testing.T) {
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprint("version ", version), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "psych.db")
			stmts := append([]string(nil), schema...)
			for v := 2; v <= version; v++ {
				stmts = append(stmts, migrations[v]...)
			}
			const cols = `id, call_id, code, limits, network, bindings, backend, engine, interpreter, image, env_keys`
			raw(t, path, append(stmts,
				fmt.Sprintf("PRAGMA application_id = %d", applicationID), fmt.Sprintf("PRAGMA user_version = %d", version),
				`INSERT INTO executions (`+cols+`) VALUES ('running', '', 'x', '{}', 0, '[]', '', '', '', '', '[]')`,
				`INSERT INTO executions (`+cols+`, result, duration_ns, finished) VALUES ('done', '', 'x', '{}', 0, '[]', '', '', '', '', '[]', '{"stdout":"hi\n"}', 5, 1)`,
				`INSERT INTO executions (`+cols+`) VALUES ('stopped', '', 'x', '{}', 0, '[]', '', '', '', '', '[]')`)...)
			s := open(t, path)
			want := map[string]psych.ExecutionStatus{"running": psych.ExecutionIncomplete, "done": psych.ExecutionFinished, "stopped": psych.ExecutionIncomplete}
			check := func(what string) {
				t.Helper()
				es, err := s.Executions(ctx)
				if err != nil || len(es) != 3 {
					t.Fatalf("%s: %+v, %v", what, es, err)
				}
				for _, e := range es {
					if e.Status != want[e.ID] || (e.Result != nil) != (e.ID == "done") {
						t.Errorf("%s: %s has Status %q, Result %+v; want %q", what, e.ID, e.Status, e.Result, want[e.ID])
					}
				}
			}
			check("migrated")
			var done, running string
			if err := s.conn.QueryRowContext(ctx, "SELECT (SELECT status FROM executions WHERE id = 'done'), (SELECT status FROM executions WHERE id = 'running')").Scan(&done, &running); err != nil || done != "finished" || running != "incomplete" {
				t.Errorf("the status column holds %q and %q, %v; want finished and incomplete", done, running, err)
			}
			if err := s.AbortExecution(ctx, "stopped", psych.ExecutionCancelled, "client went away"); err != nil {
				t.Fatal(err)
			}
			want["stopped"] = psych.ExecutionCancelled
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// A status no psych writes reads as the result says.
			raw(t, path, `UPDATE executions SET status = 'bogus' WHERE id IN ('running', 'done')`)
			s = open(t, path) // the migrated file is a current one
			defer s.Close()
			check("reopened")
			if e, err := s.Execution(ctx, "stopped"); err != nil || e.Reason != "client went away" {
				t.Errorf("the cancelled execution: %+v, %v", e, err)
			}
			if e, err := s.Execution(ctx, "done"); err != nil || e.Owner != "" {
				t.Errorf("an older row's owner: %+v, %v; want none", e, err)
			}
			var v int
			if err := s.conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
				t.Errorf("user_version %d, %v; want %d", v, err, schemaVersion)
			}
		})
	}
}

// TestFailedCommitRecovers: a commit that fails (the disk full) fails the
// records it held and the waiters, not the store: once there is room, the
// next commit writes the calls it kept, in order, and runs begin again.
func TestFailedCommitRecovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psych.db")
	s := open(t, path)
	defer s.Close()
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "a", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// The disk is full: no page more.
	if _, err := s.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 64<<10) + `"`)
	for i := range 3 {
		if err := s.RecordCall(ctx, &psych.CallRecord{ID: fmt.Sprint("full", i), Parent: "a", Tool: "t", Args: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "b", Started: time.Now()}); err == nil {
		t.Fatal("a begin on a full disk succeeded")
	}
	if _, err := s.Calls(ctx, "a"); err == nil {
		t.Fatal("a read with calls not committed succeeded")
	}
	if _, err := s.conn.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	// Runs are not refused for the past failure.
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "c", Started: time.Now()}); err != nil {
		t.Fatalf("a begin after the disk has room: %v", err)
	}
	rec := &psych.CallRecord{ID: "after", Parent: "a", Tool: "t", Args: json.RawMessage(`{}`)}
	if err := s.RecordCall(ctx, rec); err != nil {
		t.Fatal(err)
	}
	calls, err := s.Calls(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, c := range calls {
		ids = append(ids, c.ID)
		if c.Seq != int64(i+1) {
			t.Errorf("call %s has seq %d; want %d", c.ID, c.Seq, i+1)
		}
	}
	if strings.Join(ids, ",") != "full0,full1,full2,after" {
		t.Errorf("calls %v; want the kept ones, then the new one", ids)
	}
	if _, err := s.Execution(ctx, "b"); !errors.Is(err, psych.ErrNotFound) {
		t.Errorf("the refused begin: %v; want not found", err)
	}
	if err := s.FinishExecution(ctx, "c", &sandbox.Result{ID: "c"}); err != nil {
		t.Error(err)
	}
}

// TestQueueBoundedInBytes: while the writer cannot commit (another
// process holds the file's lock), RecordCall queues at most maxQueueBytes
// of payload, then waits, so what a store holds in memory stays bounded.
func TestQueueBoundedInBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "psych.db")
	s := open(t, path)
	defer s.Close()
	if err := s.BeginExecution(ctx, &psych.Execution{ID: "a", Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	other, err := s.db.Conn(ctx) // a reader's connection, taking the write lock
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<20) + `"`)
	queued := 0
	for i := range 2 * maxQueueBytes >> 20 {
		c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := s.RecordCall(c, &psych.CallRecord{ID: fmt.Sprint(i), Parent: "a", Tool: "t", Args: big})
		cancel()
		if err != nil {
			break
		}
		queued++
	}
	other.ExecContext(ctx, "ROLLBACK")
	other.Close()
	// The first call is the writer's, waiting on the lock; the queue
	// holds the rest.
	if queued > maxQueueBytes>>20+1 {
		t.Errorf("%d MiB queued behind a held lock; want at most %d and the one being committed", queued, maxQueueBytes>>20)
	}
	if calls, err := s.Calls(ctx, "a"); err != nil || len(calls) != queued {
		t.Errorf("after the lock: %d calls, %v; want the %d queued", len(calls), err, queued)
	}
}

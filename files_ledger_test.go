package psych_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
)

// filesSandbox runs no program: its result has the files it was built with.
type filesSandbox struct {
	files     []sandbox.OutFile
	artifacts []sandbox.Artifact
}

func (s *filesSandbox) Run(_ context.Context, req sandbox.Request) (*sandbox.Result, error) {
	return &sandbox.Result{ID: req.ID, Files: s.files, Artifacts: s.artifacts}, nil
}

func (s *filesSandbox) Close() error { return nil }

// TestLedgerFilesWithoutData: the ledger records each file a request
// handed in and each a run returned by path, size and sha256, never its
// data; the caller's result keeps it.
func TestLedgerFilesWithoutData(t *testing.T) {
	st := psych.NewMemoryStore()
	files := []sandbox.OutFile{{Path: "out.csv", Size: 3, SHA256: "abc", Mode: 0o644, Data: []byte("a,b")}}
	r := newRuntime(t, psych.Config{Sandbox: &filesSandbox{files: files}, Store: st})
	res, err := r.Execute(context.Background(), sandbox.Request{Code: "1", Files: []sandbox.File{{Path: "in.txt", Data: []byte("abc")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || string(res.Files[0].Data) != "a,b" {
		t.Fatalf("the caller's result lost its files' data: %+v", res.Files)
	}
	rec, err := st.Execution(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	// sha256("abc")
	if want := []psych.FileRecord{{Path: "in.txt", Size: 3, SHA256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}}; !reflect.DeepEqual(rec.Files, want) {
		t.Fatalf("the ledger's files in: %+v, want %+v", rec.Files, want)
	}
	got := rec.Result.Files
	if len(got) != 1 || got[0].Path != "out.csv" || got[0].Size != 3 || got[0].SHA256 != "abc" || got[0].Data != nil {
		t.Fatalf("the ledger's files: %+v; want path, size and sha256 without data", got)
	}
}

// TestLedgerArtifactsWithoutData: the ledger records each artifact by
// name, size and sha256 (and its sides), never its data; the caller's
// result keeps it.
func TestLedgerArtifactsWithoutData(t *testing.T) {
	st := psych.NewMemoryStore()
	arts := []sandbox.Artifact{{Name: "figure-1.png", MIME: sandbox.MIMEPNG, Width: 2, Height: 3, Size: 4, SHA256: "def", Data: []byte("\x89PNG")}}
	r := newRuntime(t, psych.Config{Sandbox: &filesSandbox{artifacts: arts}, Store: st})
	res, err := r.Execute(context.Background(), sandbox.Request{Code: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Artifacts) != 1 || string(res.Artifacts[0].Data) != "\x89PNG" {
		t.Fatalf("the caller's result lost its artifacts' data: %+v", res.Artifacts)
	}
	rec, err := st.Execution(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := arts[0]
	want.Data = nil
	if got := rec.Result.Artifacts; len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("the ledger's artifacts: %+v; want %+v", got, want)
	}
}

// TestReplayNotesFiles: a replay of a run that had files in says that the
// ledger kept them by hash only, and that this replay has none.
func TestReplayNotesFiles(t *testing.T) {
	st := psych.NewMemoryStore()
	r := newRuntime(t, psych.Config{Sandbox: &filesSandbox{}, Store: st})
	res, err := r.Execute(context.Background(), sandbox.Request{Code: "1", Files: []sandbox.File{{Path: "a"}, {Path: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Replay(context.Background(), res.ID, psych.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "2 files in, which the ledger keeps by hash only") {
		t.Fatalf("replay notes %q say nothing of the files", rep.Notes)
	}
}

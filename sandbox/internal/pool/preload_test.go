package pool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func frame(body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(b, body...)
}

// TestReadPreloaded: a good frame is read exactly (what follows stays
// unread); every bad one is an error, an import's failure ErrPreload.
func TestReadPreloaded(t *testing.T) {
	r := bytes.NewReader(append(frame(`{"type":"preloaded","env":["A","B"],"all":false,"modules":["numpy"]}`), "rest"...))
	p, err := ReadPreloaded(r)
	if err != nil || strings.Join(p.Env, ",") != "A,B" || p.All || strings.Join(p.Modules, ",") != "numpy" {
		t.Fatalf("ReadPreloaded = %+v, %v", p, err)
	}
	if r.Len() != len("rest") {
		t.Errorf("it left %d bytes, want the 4 after the frame", r.Len())
	}
	_, err = ReadPreloaded(bytes.NewReader(frame(`{"type":"preloaded","error":"import x: ModuleNotFoundError: No module named 'x'"}`)))
	if !errors.Is(err, ErrPreload) || !strings.Contains(err.Error(), "No module named 'x'") {
		t.Errorf("a failed import: %v, want ErrPreload with its message", err)
	}
	huge := binary.BigEndian.AppendUint32(nil, maxPreloadedFrame+1)
	for name, in := range map[string][]byte{
		"empty":         nil,
		"cut short":     frame(`{"type":"preloaded"}`)[:10],
		"zero length":   {0, 0, 0, 0},
		"too long":      huge,
		"not JSON":      frame(`{"type":`),
		"another type":  frame(`{"type":"result","value":1}`),
		"unknown field": frame(`{"type":"preloaded","env":[],"x":1}`),
		"two objects":   frame(`{"type":"preloaded"}{}`),
		"empty name":    frame(`{"type":"preloaded","env":[""]}`),
		"name with =":   frame(`{"type":"preloaded","env":["A=B"]}`),
		"long name":     frame(`{"type":"preloaded","modules":["` + strings.Repeat("m", maxPreloadedName+1) + `"]}`),
		"many names":    frame(`{"type":"preloaded","env":["A"` + strings.Repeat(`,"A"`, maxPreloadedNames) + `]}`),
	} {
		if p, err := ReadPreloaded(bytes.NewReader(in)); err == nil || errors.Is(err, ErrPreload) {
			t.Errorf("%s: %+v, %v; want an error other than ErrPreload", name, p, err)
		}
	}
}

// TestImportEnvColdReason: a variable the preload read, one on the table
// of a package it loaded (by prefix too), or any one after it read the
// whole environment sends a request cold, naming it; the sandbox's own
// variables, a table row of a package not loaded, and no preload do not.
func TestImportEnvColdReason(t *testing.T) {
	var none *ImportEnv
	if why := none.ColdReason([]string{"OPENBLAS_NUM_THREADS"}); why != "" {
		t.Errorf("no preload: %q", why)
	}
	e := NewImportEnv()
	e.Add(&Preloaded{Env: []string{"PANDAS_COPY_ON_WRITE", "HOME"}, Modules: []string{"pandas", "numpy"}})
	for names, want := range map[string]string{
		"PANDAS_COPY_ON_WRITE":   "env PANDAS_COPY_ON_WRITE is read by the preloaded modules at import",
		"OPENBLAS_NUM_THREADS":   "env OPENBLAS_NUM_THREADS may be read at import by the preloaded numpy (C libraries)",
		"X,OMP_PROC_BIND":        "env OMP_PROC_BIND may be read at import by the preloaded numpy (C libraries)",
		"PANDAS_OTHER":           "env PANDAS_OTHER may be read at import by the preloaded pandas (C libraries)",
		"HOME,PATH,X,MPLBACKEND": "", // matplotlib not loaded
		"OPENBLAS":               "", // not the prefix OPENBLAS_
		"":                       "",
	} {
		list := splitNames(names)
		if got := e.ColdReason(list); got != want {
			t.Errorf("ColdReason(%v) = %q, want %q", list, got, want)
		}
	}
	e.Add(&Preloaded{All: true})
	if got := e.ColdReason([]string{"HOME", "X"}); !strings.Contains(got, "env X") {
		t.Errorf("after a preload read the whole environment: %q, want X named", got)
	}
}

// TestImportEnvBounded: reports that keep naming new variables fill it to
// its bound, and from there every request with a variable runs cold.
func TestImportEnvBounded(t *testing.T) {
	e := NewImportEnv()
	for i := range 3 {
		names := make([]string, maxPreloadedNames)
		for j := range names {
			names[j] = fmt.Sprintf("V%d_%d", i, j)
		}
		e.Add(&Preloaded{Env: names})
	}
	if len(e.env) > maxPreloadedNames {
		t.Errorf("it holds %d names, want at most %d", len(e.env), maxPreloadedNames)
	}
	if got := e.ColdReason([]string{"UNREAD"}); !strings.Contains(got, "whole environment") {
		t.Errorf("past the bound: %q, want every variable cold", got)
	}
}

// TestStartEnvReason: a variable the loader or glibc reads as a process
// starts (by prefix too) sends a request cold, naming the first; others,
// and a name that only begins like a prefix without its '_', do not.
func TestStartEnvReason(t *testing.T) {
	for names, want := range map[string]string{
		"X,LD_PRELOAD":        "env LD_PRELOAD is read by the loader or libc as the interpreter starts",
		"LD_LIBRARY_PATH":     "env LD_LIBRARY_PATH is read by the loader or libc as the interpreter starts",
		"GLIBC_TUNABLES":      "env GLIBC_TUNABLES is read by the loader or libc as the interpreter starts",
		"MALLOC_PERTURB_,TZ":  "env MALLOC_PERTURB_ is read by the loader or libc as the interpreter starts",
		"LOCPATH":             "env LOCPATH is read by the loader or libc as the interpreter starts",
		"TZ,LDAP_HOST,MALLOC": "",
		"":                    "",
	} {
		list := splitNames(names)
		if got := StartEnvReason(list); got != want {
			t.Errorf("StartEnvReason(%v) = %q, want %q", list, got, want)
		}
	}
}

// splitNames is a test table's comma-separated names; none for "".
func splitNames(names string) []string {
	if names == "" {
		return nil
	}
	return strings.Split(names, ",")
}

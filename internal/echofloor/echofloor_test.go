package echofloor_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/internal/echofloor"
)

type rw struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (p *rw) Read(b []byte) (int, error)  { return p.in.Read(b) }
func (p *rw) Write(b []byte) (int, error) { return p.out.Write(b) }

func frame(s string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
	return append(b, s...)
}

func TestServeEchoes(t *testing.T) {
	in := append(frame(`{"a":1}`), frame(`{"b":22}`)...)
	p := &rw{in: bytes.NewReader(in)}
	firsts := 0
	if err := echofloor.Serve(p, func() { firsts++ }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.out.Bytes(), in) {
		t.Fatalf("echoed %q, want %q", p.out.Bytes(), in)
	}
	if firsts != 1 {
		t.Fatalf("first called %d times", firsts)
	}
}

func TestServeRefusesLargeFrame(t *testing.T) {
	in := binary.BigEndian.AppendUint32(nil, 1<<30)
	p := &rw{in: bytes.NewReader(in)}
	err := echofloor.Serve(p, nil)
	if err == nil || !strings.Contains(err.Error(), "frame of") {
		t.Fatalf("err = %v, want a refused frame", err)
	}
	if p.out.Len() != 0 {
		t.Fatalf("echoed %d bytes of a refused frame", p.out.Len())
	}
}

func TestServeTruncatedFrame(t *testing.T) {
	in := frame(`{"a":1}`)
	p := &rw{in: bytes.NewReader(in[:len(in)-2])}
	if err := echofloor.Serve(p, nil); err == nil {
		t.Fatal("a frame cut short was not an error")
	}
}

package psych

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// recordOverhead is what one call record costs a run's budget besides its
// arguments, value and error: its ids, times and the store's own.
const recordOverhead = 256

// runBudget is what is left of a run's Config.RecordRunBytes.
type runBudget struct {
	mu   sync.Mutex
	left int64
}

// take takes up to want bytes from b (all of want when b is nil) and
// returns how many it may keep.
func (b *runBudget) take(want int) int {
	if b == nil {
		return want
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := int(min(int64(want), max(b.left, 0)))
	b.left -= int64(n)
	return n
}

// capRecord bounds what rec gives the Store: the arguments to
// Config.RecordArgsBytes, the value and the error together to
// RecordValueBytes, and all of them within what is left of run's budget.
// A cut payload keeps its head (as a JSON string for Args and Value), its
// full size (BytesIn, BytesOut) and its sha256.
func (r *Runtime) capRecord(rec *CallRecord, run *runBudget) {
	run.take(recordOverhead + len(rec.ID) + len(rec.Tool) + len(rec.Reason))
	keep := run.take(min(len(rec.Args), r.cfg.RecordArgsBytes))
	if keep < len(rec.Args) {
		rec.ArgsSHA256, rec.ArgsTruncated = digest(rec.Args), true
		rec.Args = head(rec.Args, keep)
	}
	keep = run.take(min(len(rec.Value), r.cfg.RecordValueBytes))
	if keep < len(rec.Value) {
		rec.ValueSHA256, rec.ValueTruncated = digest(rec.Value), true
		rec.Value = head(rec.Value, keep)
	}
	room := max(r.cfg.RecordValueBytes-min(len(rec.Value), r.cfg.RecordValueBytes), 0)
	keep = run.take(min(len(rec.Error), room))
	if keep < len(rec.Error) {
		rec.Error = cut(rec.Error, keep) + fmt.Sprintf("… (%d more bytes not recorded)", len(rec.Error)-len(cut(rec.Error, keep)))
	}
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// head is the longest start of b whose text as a JSON string (ending on a
// whole UTF-8 character) takes at most n bytes.
func head(b []byte, n int) json.RawMessage {
	for take := n - 2; ; {
		out, _ := json.Marshal(cut(string(b), max(take, 0)))
		if len(out) <= n || take <= 0 {
			return out
		}
		take -= len(out) - n
	}
}

// cut is the first n bytes of s, fewer to end on a whole character.
func cut(s string, n int) string {
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

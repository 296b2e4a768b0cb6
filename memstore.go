package psych

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/psych-runtime/psych/sandbox"
)

// MemoryStore is a Store held in memory, for tests and for programs that
// want a recording only while they run. It is safe for concurrent use.
//
// It deep-copies every record in and out: nothing a caller passed or got
// back aliases what it holds. Seq counts from 1. It never blocks, so it
// ignores ctx. After Close every method but Close returns an error.
type MemoryStore struct {
	// Every record held is a clone that nothing outside reaches.
	mu     sync.Mutex
	closed bool
	seq    int64
	order  []*Execution // begin order
	byID   map[string]*Execution
	calls  map[string][]CallRecord // by parent, in Seq order
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{byID: map[string]*Execution{}, calls: map[string][]CallRecord{}}
}

// BeginExecution records rec as given, Result and Finished included, and
// sets its Status from them (see Execution.Status).
func (m *MemoryStore) BeginExecution(_ context.Context, rec *Execution) error {
	if rec == nil || rec.ID == "" {
		return errors.New("begin execution: no id")
	}
	e := clone(rec)
	switch {
	case e.Result != nil:
		e.Status = ExecutionFinished
	case !e.Status.Aborted():
		e.Status = ExecutionIncomplete
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return fmt.Errorf("begin execution %q: %w", rec.ID, ErrClosed)
	case m.byID[e.ID] != nil:
		return fmt.Errorf("begin execution %q: %w", rec.ID, ErrDuplicateID)
	}
	m.order = append(m.order, e)
	m.byID[e.ID] = e
	return nil
}

// FinishExecution attests the execution with res (Execution.Attest) and
// sets its Finished time to now, replacing an earlier result.
func (m *MemoryStore) FinishExecution(_ context.Context, id string, res *sandbox.Result) error {
	if res == nil {
		return fmt.Errorf("finish execution %q: nil result", id)
	}
	r, now := clone(res), time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("finish execution %q: %w", id, ErrClosed)
	}
	e := m.byID[id]
	if e == nil {
		return fmt.Errorf("finish execution %q: %w", id, ErrNotFound)
	}
	e.Attest(r)
	e.Finished = now
	return nil
}

// AbortExecution records that the execution ended without a result.
func (m *MemoryStore) AbortExecution(_ context.Context, id string, status ExecutionStatus, reason string) error {
	if !status.Aborted() {
		return fmt.Errorf("abort execution %q: status %.32q is neither cancelled nor failed", id, status)
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("abort execution %q: %w", id, ErrClosed)
	}
	e := m.byID[id]
	switch {
	case e == nil:
		return fmt.Errorf("abort execution %q: %w", id, ErrNotFound)
	case e.Result != nil:
		return fmt.Errorf("abort execution %q: %w", id, ErrFinished)
	}
	e.Status, e.Reason, e.Finished = status, reason, now
	return nil
}

// RecordCall records a copy of rec and sets rec.Seq.
func (m *MemoryStore) RecordCall(_ context.Context, rec *CallRecord) error {
	if rec == nil {
		return errors.New("record call: nil record")
	}
	c := clone(rec)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("record call: %w", ErrClosed)
	}
	m.seq++
	c.Seq, rec.Seq = m.seq, m.seq
	m.calls[c.Parent] = append(m.calls[c.Parent], *c)
	return nil
}

// Execution returns a copy of the execution id.
func (m *MemoryStore) Execution(_ context.Context, id string) (*Execution, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("read execution %q: %w", id, ErrClosed)
	}
	e := m.byID[id]
	if e == nil {
		return nil, fmt.Errorf("read execution %q: %w", id, ErrNotFound)
	}
	return clone(e), nil
}

// Executions lists copies of every execution in the order they began.
func (m *MemoryStore) Executions(context.Context) ([]Execution, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("list executions: %w", ErrClosed)
	}
	out := make([]Execution, 0, len(m.order))
	for _, e := range m.order {
		out = append(out, *clone(e))
	}
	return out, nil
}

// Calls lists copies of the calls whose parent is execution, in Seq order.
func (m *MemoryStore) Calls(_ context.Context, execution string) ([]CallRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("list calls of %q: %w", execution, ErrClosed)
	}
	out := make([]CallRecord, 0, len(m.calls[execution]))
	for i := range m.calls[execution] {
		out = append(out, *clone(&m.calls[execution][i]))
	}
	return out, nil
}

// Close drops everything held. Closing twice is not an error.
func (m *MemoryStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed, m.order, m.byID, m.calls = true, nil, nil, nil
	return nil
}

// clone deep-copies v: every pointer, slice and map reachable through
// exported fields is copied, so a field added to a record is copied too.
func clone[T any](v *T) *T {
	if v == nil {
		return nil
	}
	return deepCopy(reflect.ValueOf(v)).Interface().(*T)
}

func deepCopy(v reflect.Value) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if v.IsNil() {
			return out
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(deepCopy(v.Elem()))
		out.Set(p)
	case reflect.Slice:
		out.Set(reflect.MakeSlice(v.Type(), v.Len(), v.Len()))
		for i := range v.Len() {
			out.Index(i).Set(deepCopy(v.Index(i)))
		}
	case reflect.Map:
		out.Set(reflect.MakeMapWithSize(v.Type(), v.Len()))
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(deepCopy(it.Key()), deepCopy(it.Value()))
		}
	case reflect.Struct:
		out.Set(v) // unexported fields (a time.Time's) are values
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out.Field(i).Set(deepCopy(v.Field(i)))
			}
		}
	default:
		out.Set(v)
	}
	return out
}

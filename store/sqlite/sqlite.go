package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/sandbox"
)

// Sentinel errors. Other errors wrap them with %w; test with errors.Is.
var (
	// ErrNotStore: the file is not a SQLite database, or holds tables that
	// are not a psych store's.
	ErrNotStore = errors.New("not a psych store")
	// ErrVersion: the store's schema version is newer than this psych's,
	// or unknown.
	ErrVersion = errors.New("unsupported store version")
	// ErrClosed: the Store was closed (psych.ErrClosed).
	ErrClosed = psych.ErrClosed
)

const (
	schemaVersion = 5
	applicationID = 0x70737963 // "psyc"
	commitDelay   = 5 * time.Millisecond
	retryDelay    = time.Second // after a failed commit, when nothing new comes
	maxQueue      = 4096        // RecordCall waits for the writer beyond this
	maxQueueBytes = 32 << 20    // or beyond this much queued payload
	pragmas       = "?_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)&_pragma=trusted_schema(0)"
)

// schema is version 1's; migrations[v] takes a file from version v-1 to v.
// A new file is made by both, so that a new file's schema and a migrated
// one's are the same text, which is compared (as sqlite_schema holds it)
// with an existing file's.
var schema = []string{
	`CREATE TABLE executions (
	n INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	call_id TEXT NOT NULL,
	started INTEGER,
	code TEXT NOT NULL,
	limits TEXT NOT NULL,
	network INTEGER NOT NULL,
	bindings TEXT NOT NULL,
	backend TEXT NOT NULL,
	engine TEXT NOT NULL,
	interpreter TEXT NOT NULL,
	image TEXT NOT NULL,
	env_keys TEXT NOT NULL,
	result TEXT,
	duration_ns INTEGER,
	failure TEXT,
	limit_hit TEXT,
	finished INTEGER
) STRICT`,
	`CREATE TABLE calls (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL,
	parent TEXT NOT NULL,
	tool TEXT NOT NULL,
	args BLOB,
	via TEXT NOT NULL,
	decision TEXT NOT NULL,
	reason TEXT NOT NULL,
	approver TEXT NOT NULL,
	approved INTEGER,
	decision_ns INTEGER NOT NULL,
	started INTEGER,
	duration_ns INTEGER NOT NULL,
	outcome TEXT NOT NULL,
	value BLOB,
	error TEXT NOT NULL,
	bytes_in INTEGER NOT NULL,
	bytes_out INTEGER NOT NULL
) STRICT`,
	`CREATE INDEX calls_by_parent ON calls (parent, seq)`,
}

var migrations = map[int][]string{
	// The record caps: a call's payload past them keeps its head, its size
	// (bytes_in, bytes_out) and its sha256.
	2: {
		`ALTER TABLE calls ADD COLUMN args_truncated INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE calls ADD COLUMN args_sha256 TEXT NOT NULL DEFAULT ''`,
		`ALTER TABLE calls ADD COLUMN value_truncated INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE calls ADD COLUMN value_sha256 TEXT NOT NULL DEFAULT ''`,
	},
	// The execution's status: an end without a result (cancelled, failed)
	// is told from one still running, with the reason. A row of an older
	// file is finished when it has a result, else incomplete.
	3: {
		`ALTER TABLE executions ADD COLUMN status TEXT NOT NULL DEFAULT 'incomplete'`,
		`ALTER TABLE executions ADD COLUMN reason TEXT NOT NULL DEFAULT ''`,
		`UPDATE executions SET status = 'finished' WHERE result IS NOT NULL`,
	},
	// Who asked for the run (Execution.Owner): '' for an older row.
	4: {
		`ALTER TABLE executions ADD COLUMN owner TEXT NOT NULL DEFAULT ''`,
	},
	// The files a request handed in (Execution.Files), by path, size and
	// sha256: 'null' (none) for an older row.
	5: {
		`ALTER TABLE executions ADD COLUMN files TEXT NOT NULL DEFAULT 'null'`,
	},
}

// schemaOf is the text sqlite_schema holds for each version, made once in
// a database in memory.
var schemaOf = sync.OnceValues(func() (map[int][]string, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out := map[int][]string{}
	for v := 1; v <= schemaVersion; v++ {
		stmts := migrations[v]
		if v == 1 {
			stmts = schema
		}
		for _, q := range stmts {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return nil, fmt.Errorf("schema version %d: %w", v, err)
			}
		}
		if out[v], err = schemaText(ctx, c); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// schemaText is what sqlite_schema holds, sorted.
func schemaText(ctx context.Context, c *sql.Conn) ([]string, error) {
	rows, err := c.QueryContext(ctx, `SELECT COALESCE(sql, '') FROM sqlite_schema WHERE name NOT LIKE 'sqlite\_autoindex\_%' ESCAPE '\' ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	var have []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			rows.Close()
			return nil, err
		}
		have = append(have, q)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	return have, nil
}

const (
	execCols = `id, call_id, started, code, limits, network, bindings, backend, engine, interpreter, image, env_keys, result, duration_ns, finished, status, reason, owner, files`
	callCols = `seq, id, parent, tool, args, via, decision, reason, approver, approved, decision_ns, started, duration_ns, outcome, value, error, bytes_in, bytes_out, args_truncated, args_sha256, value_truncated, value_sha256`

	insertExec = `INSERT INTO executions (` + execCols + `, failure, limit_hit)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	insertCall     = `INSERT INTO calls (` + callCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	selectAttested = `SELECT backend, engine, interpreter, image, env_keys FROM executions WHERE id = ?`
	updateFinish   = `UPDATE executions SET backend = ?, engine = ?, interpreter = ?, image = ?, env_keys = ?,
result = ?, duration_ns = ?, failure = ?, limit_hit = ?, finished = ?, status = 'finished', reason = '' WHERE id = ?`
	updateAbort = `UPDATE executions SET status = ?, reason = ?, finished = ? WHERE id = ? AND result IS NULL`
)

// Store is a psych.Store in one SQLite file. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	conn *sql.Conn // the writer's own
	stmt struct{ exec, call, attested, finish, abort *sql.Stmt }

	mu         sync.Mutex
	queue      []op
	queueBytes int       // the payload queued, and that of the batch being committed
	first      time.Time // when the oldest queued op was queued
	urgent     bool      // someone waits: commit without delay
	closing    bool
	failed     error // the last commit failed; cleared by one that succeeds
	seq        int64 // the last Seq handed out
	queued     int64 // ops queued, ever
	done       int64 // ops the writer is finished with
	progress   chan struct{}
	kick       chan struct{} // wakes the writer; capacity 1
	stopped    chan struct{} // closed when the writer returns
	readers    sync.WaitGroup
}

var _ psych.Store = (*Store)(nil)

type opKind int

const (
	opCall opKind = iota
	opBegin
	opFinish
	opAbort
)

// op is one queued write; its args are the statement's, already copied.
type op struct {
	kind opKind
	id   string
	args []any
	size int             // the payload's bytes, for maxQueueBytes
	res  *sandbox.Result // opFinish: a private copy, for Attest
	err  error           // ErrDuplicateID, ErrNotFound or ErrFinished, set by the writer
	wait chan error      // nil for calls
}

// Open opens the store at path, creating it if absent. It refuses a file
// that is not a psych store (ErrNotStore) and a schema it does not know
// (ErrVersion), and leaves such a file as it was.
func Open(path string) (_ *Store, retErr error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// A file: URI, escaped, so no character of the path reads as a query.
	uri := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs))
	if !strings.HasPrefix(uri, "/") {
		uri = "/" + uri // C:/x
	}
	// SQLite makes the -wal and -shm files with the database file's mode:
	// a new store is made 0600, whatever the umask, as is all of it.
	if f, err := os.OpenFile(abs, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", "file:"+uri+pragmas)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.SetMaxOpenConns(8) // the writer's and seven readers'
	s := &Store{db: db, progress: make(chan struct{}), kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	defer func() {
		if retErr != nil {
			s.closeDB()
			if e := (*msqlite.Error)(nil); errors.As(retErr, &e) && e.Code()&0xff == sqlite3.SQLITE_NOTADB {
				retErr = fmt.Errorf("%w: %w", ErrNotStore, retErr)
			}
			retErr = fmt.Errorf("open store %s: %w", path, retErr)
		}
	}()
	ctx := context.Background()
	if s.conn, err = db.Conn(ctx); err != nil {
		return nil, err
	}
	if err := migrate(ctx, s.conn); err != nil {
		return nil, err
	}
	var mode string
	if err := s.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return nil, fmt.Errorf("set WAL mode: %w", err)
	} else if mode != "wal" {
		return nil, fmt.Errorf("set WAL mode: journal mode stays %q", mode)
	}
	if err := s.conn.QueryRowContext(ctx, "SELECT COALESCE(MAX(seq), 0) FROM calls").Scan(&s.seq); err != nil {
		return nil, fmt.Errorf("read last seq: %w", err)
	}
	for q, p := range map[string]**sql.Stmt{insertExec: &s.stmt.exec, insertCall: &s.stmt.call, selectAttested: &s.stmt.attested, updateFinish: &s.stmt.finish, updateAbort: &s.stmt.abort} {
		if *p, err = s.conn.PrepareContext(ctx, q); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	go s.run()
	return s, nil
}

// migrate creates the schema in an empty file, or checks an existing one,
// in one transaction that writes nothing unless the file was empty.
func migrate(ctx context.Context, c *sql.Conn) (retErr error) {
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		end := "COMMIT"
		if retErr != nil {
			end = "ROLLBACK"
		}
		if _, err := c.ExecContext(ctx, end); err != nil && retErr == nil {
			retErr = err
		}
	}()
	var app, version int64
	if err := c.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return err
	}
	if err := c.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	have, err := schemaText(ctx, c)
	if err != nil {
		return err
	}
	want, err := schemaOf()
	if err != nil {
		return err
	}
	from := version
	switch {
	case app == 0 && version == 0 && len(have) == 0:
		from = 0
		if _, err := c.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	case app != applicationID:
		return fmt.Errorf("%w: application id %#x, %d schema objects", ErrNotStore, app, len(have))
	case version > schemaVersion:
		return fmt.Errorf("%w: version %d is newer than this psych's %d", ErrVersion, version, schemaVersion)
	case version < 1:
		return fmt.Errorf("%w: version %d", ErrVersion, version)
	case !slices.Equal(have, want[int(version)]):
		return fmt.Errorf("%w: the schema was altered", ErrNotStore)
	}
	for v := int(from) + 1; v <= schemaVersion; v++ {
		stmts := migrations[v]
		if v == 1 {
			stmts = schema
		}
		for _, q := range append(stmts, fmt.Sprintf("PRAGMA user_version = %d", v)) {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("migrate to version %d: %w", v, err)
			}
		}
	}
	return nil
}

// BeginExecution records rec as given, Result and Finished included. It
// returns once committed.
func (s *Store) BeginExecution(ctx context.Context, rec *psych.Execution) error {
	if rec == nil || rec.ID == "" {
		return errors.New("begin execution: no id")
	}
	args, err := execArgs(rec)
	if err == nil {
		err = s.await(ctx, op{kind: opBegin, id: rec.ID, args: args})
	}
	if err != nil {
		return fmt.Errorf("begin execution %q: %w", rec.ID, err)
	}
	return nil
}

// FinishExecution attests the execution with res (Execution.Attest) and
// sets Finished to now, replacing an earlier result. It returns once
// committed.
func (s *Store) FinishExecution(ctx context.Context, id string, res *sandbox.Result) error {
	if res == nil {
		return fmt.Errorf("finish execution %q: nil result", id)
	}
	args, c, err := resultArgs(res)
	if err == nil {
		finished, _ := nanos(time.Now())
		err = s.await(ctx, op{kind: opFinish, id: id, args: append(args, finished), res: c})
	}
	if err != nil {
		return fmt.Errorf("finish execution %q: %w", id, err)
	}
	return nil
}

// AbortExecution records that the execution ended without a result, and
// sets Finished to now. It returns once committed.
func (s *Store) AbortExecution(ctx context.Context, id string, status psych.ExecutionStatus, reason string) error {
	if !status.Aborted() {
		return fmt.Errorf("abort execution %q: status %.32q is neither cancelled nor failed", id, status)
	}
	finished, _ := nanos(time.Now())
	if err := s.await(ctx, op{kind: opAbort, id: id, args: []any{string(status), reason, finished, id}}); err != nil {
		return fmt.Errorf("abort execution %q: %w", id, err)
	}
	return nil
}

// RecordCall sets rec.Seq and queues a copy of rec; the writer commits it
// within 5 ms. It waits only while the queue is full.
func (s *Store) RecordCall(ctx context.Context, rec *psych.CallRecord) error {
	if rec == nil {
		return errors.New("record call: nil record")
	}
	args, err := callArgs(rec)
	if err != nil {
		return fmt.Errorf("record call %q: %w", rec.ID, err)
	}
	size := payload(args)
	s.mu.Lock()
	for s.full() && s.usable() == nil {
		if s.failed != nil {
			// The writer keeps what it could not commit; while it
			// cannot, a full queue refuses more.
			err := s.failed
			s.mu.Unlock()
			return fmt.Errorf("record call %q: %w", rec.ID, err)
		}
		if err := s.awaitCommit(ctx); err != nil {
			return fmt.Errorf("record call %q: %w", rec.ID, err)
		}
	}
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return fmt.Errorf("record call %q: %w", rec.ID, err)
	}
	s.seq++
	rec.Seq, args[0] = s.seq, s.seq
	s.enqueue(op{kind: opCall, args: args, size: size})
	return nil
}

// full says whether RecordCall waits; s.mu is held.
func (s *Store) full() bool { return len(s.queue) >= maxQueue || s.queueBytes >= maxQueueBytes }

// payload is the bytes of a call's blobs and strings.
func payload(args []any) int {
	n := 0
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			n += len(v)
		case string:
			n += len(v)
		}
	}
	return n
}

// Execution returns the execution id (ErrNotFound if none).
func (s *Store) Execution(ctx context.Context, id string) (*psych.Execution, error) {
	done, err := s.read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read execution %q: %w", id, err)
	}
	defer done()
	e, err := scanExecution(s.db.QueryRowContext(ctx, `SELECT `+execCols+` FROM executions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = psych.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read execution %q: %w", id, err)
	}
	return &e, nil
}

// Executions lists every execution in the order they began.
func (s *Store) Executions(ctx context.Context) ([]psych.Execution, error) {
	es, err := list(ctx, s, scanExecution, `SELECT `+execCols+` FROM executions ORDER BY n`)
	if err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	return es, nil
}

// Calls lists the calls whose parent is execution, in Seq order.
func (s *Store) Calls(ctx context.Context, execution string) ([]psych.CallRecord, error) {
	cs, err := list(ctx, s, scanCall, `SELECT `+callCols+` FROM calls WHERE parent = ? ORDER BY seq`, execution)
	if err != nil {
		return nil, fmt.Errorf("list calls of %q: %w", execution, err)
	}
	return cs, nil
}

// Close commits what is queued, stops the writer and closes the file. It
// returns the error that failed the store, if one did. Closing twice is
// not an error.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		<-s.stopped
		return nil
	}
	s.closing = true
	s.wake()
	s.mu.Unlock()
	<-s.stopped
	s.readers.Wait()
	if err := errors.Join(s.failed, s.closeDB()); err != nil { // the last commit's
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

func (s *Store) closeDB() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.stmt.exec, s.stmt.call, s.stmt.attested, s.stmt.finish, s.stmt.abort} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	return errors.Join(append(errs, s.db.Close())...)
}

// usable says why nothing more may be queued; s.mu is held. A failed
// commit is no reason: the next one retries.
func (s *Store) usable() error {
	if s.closing {
		return ErrClosed
	}
	return nil
}

// enqueue queues o; s.mu is held and usable has passed.
func (s *Store) enqueue(o op) {
	if len(s.queue) == 0 {
		s.first = time.Now()
	}
	s.queue = append(s.queue, o)
	s.queueBytes += o.size
	s.queued++
	if o.wait != nil {
		s.urgent = true
	}
	if len(s.queue) == 1 || s.urgent || s.failed != nil {
		s.wake()
	}
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// await queues o and waits until it is committed.
func (s *Store) await(ctx context.Context, o op) error {
	o.wait = make(chan error, 1)
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.enqueue(o)
	s.mu.Unlock()
	select {
	case err := <-o.wait:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitCommit asks the writer to commit now and waits for its next commit
// (or failed try). s.mu is held on entry and again on a nil return; it is
// not held while waiting, nor on the return of ctx's error.
func (s *Store) awaitCommit(ctx context.Context) error {
	s.urgent = true
	s.wake()
	ch := s.progress
	s.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	return nil
}

// read waits until everything queued so far is committed; the caller
// calls done when its query is over, which Close waits for.
func (s *Store) read(ctx context.Context) (done func(), err error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	s.readers.Add(1)
	for target := s.queued; s.done < target; {
		if err := s.awaitCommit(ctx); err != nil {
			s.readers.Done()
			return nil, err
		}
		if err := s.failed; err != nil && s.done < target {
			s.mu.Unlock()
			s.readers.Done()
			return nil, err
		}
	}
	s.mu.Unlock()
	return s.readers.Done, nil
}

// run is the writer: it commits what is queued once the oldest op has
// waited commitDelay, or at once when someone waits, until Close.
func (s *Store) run() {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-s.kick:
		case <-timer.C:
		}
		s.mu.Lock()
		if len(s.queue) == 0 {
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return
			}
			continue
		}
		if wait := commitDelay - time.Since(s.first); wait > 0 && !s.urgent && !s.closing {
			s.mu.Unlock()
			timer.Reset(wait)
			continue
		}
		// The batch's bytes stay counted until its commit is over, so
		// the batch and the queue behind it hold maxQueueBytes together.
		batch := s.queue
		s.queue, s.urgent = nil, false
		s.mu.Unlock()

		err := s.commit(batch)
		s.mu.Lock()
		done := batch
		if err == nil {
			s.failed = nil
		} else {
			s.failed = fmt.Errorf("store failed: %w", err)
			if !s.closing {
				// The calls are kept, in order, for the next commit: their
				// Seq was handed out, and a gap would break the ledger's
				// order. A waiter is told, and its op dropped.
				var kept []op
				done = nil
				for _, o := range batch {
					if o.wait == nil {
						kept = append(kept, o)
					} else {
						done = append(done, o)
					}
				}
				if len(kept) > 0 {
					s.first = time.Now()
				}
				s.queue = append(kept, s.queue...)
			}
		}
		for _, o := range done {
			s.queueBytes -= o.size
		}
		s.done += int64(len(done))
		close(s.progress)
		s.progress = make(chan struct{})
		s.mu.Unlock()
		for _, o := range done {
			if o.wait != nil {
				o.wait <- cmp.Or(err, o.err)
			}
		}
		if err != nil {
			timer.Reset(retryDelay)
			continue
		}
		s.wake() // what was queued meanwhile
	}
}

// commit writes batch in one transaction.
func (s *Store) commit(batch []op) (retErr error) {
	ctx := context.Background()
	if _, err := s.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if retErr != nil {
			s.conn.ExecContext(ctx, "ROLLBACK")
		}
	}()
	for i := range batch {
		if err := s.apply(ctx, &batch[i]); err != nil {
			return err
		}
	}
	if _, err := s.conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *Store) apply(ctx context.Context, o *op) error {
	switch o.kind {
	case opCall:
		if _, err := s.stmt.call.ExecContext(ctx, o.args...); err != nil {
			return fmt.Errorf("insert call %d: %w", o.args[0], err)
		}
	case opBegin:
		r, err := s.stmt.exec.ExecContext(ctx, o.args...)
		if err != nil {
			return fmt.Errorf("insert execution %q: %w", o.id, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			o.err = psych.ErrDuplicateID
		}
	case opFinish:
		e, env, found, err := s.readAttested(ctx, o.id)
		if err != nil {
			return err
		}
		if !found {
			o.err = psych.ErrNotFound
			return nil
		}
		if err := json.Unmarshal([]byte(env), &e.EnvKeys); err != nil {
			o.err = fmt.Errorf("decode env keys: %w", err) // this row's fault, not the batch's
			return nil
		}
		e.Attest(o.res)
		env = string(mustJSON(e.EnvKeys))
		args := append([]any{e.Backend, e.Engine, e.Interpreter, e.Image, env}, o.args...)
		if _, err := s.stmt.finish.ExecContext(ctx, append(args, o.id)...); err != nil {
			return fmt.Errorf("update execution %q: %w", o.id, err)
		}
	case opAbort:
		r, err := s.stmt.abort.ExecContext(ctx, o.args...)
		if err != nil {
			return fmt.Errorf("update execution %q: %w", o.id, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n > 0 {
			return nil
		}
		switch _, _, found, err := s.readAttested(ctx, o.id); {
		case err != nil:
			return err
		case !found:
			o.err = psych.ErrNotFound
		default:
			o.err = psych.ErrFinished
		}
	}
	return nil
}

// readAttested reads what an execution's record attests (backend, engine,
// interpreter, image, and its env keys as JSON); found is false where there
// is no execution id.
func (s *Store) readAttested(ctx context.Context, id string) (e psych.Execution, env string, found bool, err error) {
	err = s.stmt.attested.QueryRowContext(ctx, id).Scan(&e.Backend, &e.Engine, &e.Interpreter, &e.Image, &env)
	if errors.Is(err, sql.ErrNoRows) {
		return e, "", false, nil
	}
	if err != nil {
		return e, "", false, fmt.Errorf("read execution %q: %w", id, err)
	}
	return e, env, true, nil
}

// list runs a query after read, scanning every row.
func list[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	done, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

type scanner interface{ Scan(dest ...any) error }

func execArgs(e *psych.Execution) ([]any, error) {
	started, err := nanos(e.Started)
	if err != nil {
		return nil, err
	}
	finished, err := nanos(e.Finished)
	if err != nil {
		return nil, err
	}
	limits, err := json.Marshal(e.Limits)
	if err != nil {
		return nil, fmt.Errorf("encode limits: %w", err)
	}
	bindings, err := json.Marshal(e.Bindings)
	if err != nil {
		return nil, fmt.Errorf("encode bindings: %w", err)
	}
	res := []any{nil, nil, nil, nil}
	if e.Result != nil {
		if res, _, err = resultArgs(e.Result); err != nil {
			return nil, err
		}
	}
	// In execCols order, then failure and limit_hit.
	return []any{e.ID, e.CallID, started, e.Code, string(limits), boolInt(e.Network), string(bindings),
		e.Backend, e.Engine, e.Interpreter, e.Image, string(mustJSON(e.EnvKeys)),
		res[0], res[1], finished, string(status(e)), e.Reason, e.Owner, string(mustJSON(e.Files)), res[2], res[3]}, nil
}

// resultArgs encodes r as its JSON, duration, failure type and limit hit,
// and decodes a private copy of it.
func resultArgs(r *sandbox.Result) ([]any, *sandbox.Result, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, nil, fmt.Errorf("encode result: %w", err)
	}
	c, err := decodeResult(b, int64(r.Duration))
	if err != nil {
		return nil, nil, err
	}
	var failure, limit any
	if r.Failure != nil {
		failure = r.Failure.Type
	}
	if r.LimitHit != "" {
		limit = string(r.LimitHit)
	}
	return []any{string(b), int64(r.Duration), failure, limit}, c, nil
}

// decodeResult reads a Result's JSON with its exact duration; a null
// Value comes back nil.
func decodeResult(b []byte, duration int64) (*sandbox.Result, error) {
	var r sandbox.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	r.Duration = time.Duration(duration)
	if string(r.Value) == "null" {
		r.Value = nil
	}
	return &r, nil
}

func scanExecution(row scanner) (psych.Execution, error) {
	var (
		e                           psych.Execution
		started, duration, finished sql.NullInt64
		limits, bindings, envKeys   string
		files                       string
		result                      sql.NullString
	)
	err := row.Scan(&e.ID, &e.CallID, &started, &e.Code, &limits, &e.Network, &bindings,
		&e.Backend, &e.Engine, &e.Interpreter, &e.Image, &envKeys, &result, &duration, &finished, &e.Status, &e.Reason, &e.Owner, &files)
	if err != nil {
		return e, err
	}
	e.Started, e.Finished = fromNanos(started), fromNanos(finished)
	for _, f := range []struct {
		name string
		text string
		into any
	}{{"limits", limits, &e.Limits}, {"bindings", bindings, &e.Bindings}, {"env keys", envKeys, &e.EnvKeys}, {"files", files, &e.Files}} {
		if err := json.Unmarshal([]byte(f.text), f.into); err != nil {
			return e, fmt.Errorf("decode %s of %q: %w", f.name, e.ID, err)
		}
	}
	if result.Valid {
		if e.Result, err = decodeResult([]byte(result.String), duration.Int64); err != nil {
			return e, fmt.Errorf("execution %q: %w", e.ID, err)
		}
	}
	e.Status = status(&e)
	return e, nil
}

// status is the Status e is recorded with: finished with a result; else
// cancelled or failed as given, or incomplete.
func status(e *psych.Execution) psych.ExecutionStatus {
	switch {
	case e.Result != nil:
		return psych.ExecutionFinished
	case e.Status.Aborted():
		return e.Status
	}
	return psych.ExecutionIncomplete
}

func callArgs(c *psych.CallRecord) ([]any, error) {
	started, err := nanos(c.Started)
	if err != nil {
		return nil, err
	}
	var approved any
	if c.Approved != nil {
		approved = boolInt(*c.Approved)
	}
	// In callCols order; Seq is set when it is assigned.
	return []any{nil, c.ID, c.Parent, c.Tool, blob(c.Args), string(c.Via), string(c.Decision), c.Reason,
		c.Approver, approved, int64(c.DecisionTime), started, int64(c.Duration), c.Outcome, blob(c.Value),
		c.Error, c.BytesIn, c.BytesOut, boolInt(c.ArgsTruncated), c.ArgsSHA256, boolInt(c.ValueTruncated), c.ValueSHA256}, nil
}

func scanCall(row scanner) (psych.CallRecord, error) {
	var (
		c           psych.CallRecord
		args, value []byte
		approved    sql.NullBool
		started     sql.NullInt64
	)
	err := row.Scan(&c.Seq, &c.ID, &c.Parent, &c.Tool, &args, &c.Via, &c.Decision, &c.Reason,
		&c.Approver, &approved, &c.DecisionTime, &started, &c.Duration, &c.Outcome, &value,
		&c.Error, &c.BytesIn, &c.BytesOut, &c.ArgsTruncated, &c.ArgsSHA256, &c.ValueTruncated, &c.ValueSHA256)
	if err != nil {
		return c, err
	}
	c.Args, c.Value, c.Started = args, value, fromNanos(started)
	if approved.Valid {
		c.Approved = new(approved.Bool)
	}
	return c, nil
}

// nanos is t in Unix nanoseconds, NULL for the zero time; a time UnixNano
// cannot hold is refused.
func nanos(t time.Time) (any, error) {
	if t.IsZero() {
		return nil, nil
	}
	if y := t.Year(); y < 1678 || y > 2261 {
		return nil, fmt.Errorf("time %v out of range", t)
	}
	return t.UnixNano(), nil
}

func fromNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64)
}

// blob copies b, keeping nil as NULL.
func blob(b []byte) any {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// mustJSON encodes a value that cannot fail to encode ([]string).
func mustJSON[T any](v []T) []byte {
	b, _ := json.Marshal(v)
	return b
}

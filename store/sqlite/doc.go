// Package sqlite is psych's embedded default Store: one SQLite file,
// written through modernc.org/sqlite (pure Go, no cgo). Only programs that
// record link it.
//
// Promises:
//   - Calls are cheap. RecordCall assigns Seq at once (one more than the
//     file's highest at Open) and queues the record; one writer goroutine
//     commits whatever is queued in a single transaction, no later than
//     5 ms after the oldest queued record. BeginExecution, FinishExecution
//     and AbortExecution go through the same queue, in order with the
//     calls, and return once committed.
//   - A reader sees its own writes: Execution, Executions and Calls first
//     wait until everything queued before them is committed.
//   - A killed process loses at most the calls not yet committed, always a
//     suffix: what is left is the calls 1..k in order, never a gap, a
//     reordering or a torn record. An execution it did not finish reads
//     back incomplete (Result nil, Status incomplete). The file is in WAL
//     mode with synchronous=NORMAL, so a power loss may also lose the last
//     commits, never the file's consistency.
//   - Records are copies, both ways; times keep their nanoseconds (between
//     the years 1678 and 2261, which time.Time's UnixNano covers; others
//     are refused) and lose their monotonic reading and location.
//   - A file that is not a psych store is refused with an error wrapping
//     ErrNotStore, and left as it was; a store written by a newer psych,
//     with an error wrapping ErrVersion. Neither ever panics.
//
// Refusals and limits:
//   - One process writes a store at a time: Seq is counted in memory, so a
//     second writing process would collide, and its commits fail (Seq is the
//     calls' primary key) rather than interleave. Other processes may read.
//   - A commit that fails (a full disk, a lock held past the 5 s busy
//     timeout) fails what waited on it (BeginExecution, FinishExecution,
//     AbortExecution, a read, which return its error), not the store: the calls it held
//     are kept, in order, and the next commit (the next operation, or a
//     retry a second later) writes them first, so the Seq handed out
//     leaves no gap. While commits fail, a full queue refuses RecordCall.
//   - Memory is bounded: RecordCall waits while 4096 records or 32 MiB of
//     their payload are queued, besides the batch being committed (the
//     Runtime caps each record's payload).
//   - A new file is made 0600, and with it its -wal and -shm files.
//   - ctx bounds a caller's wait, never the write: a record queued before
//     ctx ended is still committed.
//   - After Close, which commits what is queued, every operation returns an
//     error wrapping ErrClosed.
//
// The schema (version 3, in PRAGMA user_version; application_id "psyc"):
// executions (in begin order, the full sandbox.Result as JSON beside the
// columns a listing needs: duration, failure type, limit hit, status and
// reason) and calls (keyed by Seq, indexed by parent; a payload past the
// Runtime's record caps with its head, size and sha256). A version 1 or 2
// file is migrated when opened (version 2 added the record-cap columns,
// version 3 the status, finished for a row with a result, else incomplete).
package sqlite

// Package pool is the warm pool, whole: a Pool of ready items (fully
// started sandboxes), generic over the item and agnostic of the backend,
// which supplies Fill and Destroy; and what every backend's pool shares
// around it: taking a sandbox for a request or saying why the request runs
// cold (Warm), its dispatch (Pooled.Dispatch, after CheckPooled), and the
// preloaded frame a pooled interpreter sends (ReadPreloaded, ImportEnv).
// A backend keeps only its fill and the dispatch of its own init.
//
// What it guarantees:
//   - One use per item: Take hands each item out at most once, and never
//     after Close began. The caller owns what Take returns and destroys it;
//     the pool never touches it again.
//   - Nothing made is lost: an item the pool never handed out is destroyed
//     unused, when it outlives MaxAge or at Close (including one a fill
//     returns after Close began). When Close returns, every such item has
//     been destroyed and no goroutine of the pool is running.
//   - Refills run in the background, up to Fillers at once, after every
//     Take and every expiry; failed fills are retried with a backoff.
//   - Take hands out the oldest ready item that is still fresh (first in,
//     first out), so that none ages out unused while younger ones serve.
//   - Take never waits for a fill: it takes only a mutex, and says ok=false
//     when nothing fresh is ready. TakeWait waits for a fill already
//     running, one caller per fill, at most a bound.
//
// What it refuses: it does not recover a Fill or Destroy that panics (the
// caller's bug), and it does not destroy what a failed Fill left behind.
//
// # Files
//
//   - pool.go: Pool, the generic ready-item pool (fill, take, age, close).
//   - pooled.go: Start, Status, WaitWarm, Warm, ColdReason, a pooled
//     sandbox's Dispatch and CheckPooled, the preloaded frame read under
//     a deadline (Linux with cgo: the dispatch drives the init through
//     internal/reexec).
//   - preload.go: the preloaded frame (ReadPreloaded, bounded and strict),
//     ImportEnv (what the imports read), PreloadEnv, EnvNames.
//   - startenv.go: StartEnv, the variables read as the interpreter starts
//     (a request with one runs cold: StartEnvReason).
//   - errors.go: the sentinel errors.
package pool

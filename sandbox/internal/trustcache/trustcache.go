package trustcache

// Format is the entries' layout version: it changes whenever an entry's
// layout or meaning does, and an entry of another format is refused.
const Format = 2

// MaxEntryBytes is the largest entry read; a larger one is refused.
const MaxEntryBytes = 2 << 20

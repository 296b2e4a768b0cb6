package pool

import (
	"fmt"
	"strings"
)

// StartEnv are the variables the dynamic loader and glibc read as a
// process starts, a name ending in '*' being a prefix: the loader's LD_
// variables (LD_PRELOAD, LD_LIBRARY_PATH, LD_BIND_NOW, ...), glibc's
// tunables and their MALLOC_ aliases, and LOCPATH, where the interpreter's
// first setlocale finds its locale. A pooled interpreter started with the
// sandbox's own variables alone, so a program that gets one of these runs
// cold, where its interpreter starts with it (the interpreter's own
// PYTHON variables need no entry: it runs with -I, cold or warm).
var StartEnv = []string{"LD_*", "GLIBC_TUNABLES", "MALLOC_*", "LOCPATH"}

// StartEnvReason says why a program that gets the variables names cannot
// be served by a pooled interpreter: the first of them in StartEnv; ""
// when none is.
func StartEnvReason(names []string) string {
	for _, n := range names {
		if matchesAny(n, StartEnv) {
			return fmt.Sprintf("env %s is read by the loader or libc as the interpreter starts", n)
		}
	}
	return ""
}

// matchesAny says whether name is one of patterns, a pattern ending in
// '*' being a prefix.
func matchesAny(name string, patterns []string) bool {
	for _, v := range patterns {
		if prefix, ok := strings.CutSuffix(v, "*"); name == v || ok && strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

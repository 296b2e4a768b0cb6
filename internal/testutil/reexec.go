package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// The environment that makes a test binary run a helper instead of its
// tests: the helper's name and its argument.
const (
	HelperEnv    = "PSYCH_TEST_HELPER"
	HelperArgEnv = "PSYCH_TEST_HELPER_ARG"
)

var helpers = map[string]func(arg string) int{}

// Register names a re-exec helper of this test binary: a second process
// (a child in new namespaces, a second host) that a test starts with
// HelperCommand or HelperEnviron. It returns the helper's exit code. Call
// it from an init function; a name registered twice panics.
func Register(name string, helper func(arg string) int) {
	if name == "" || helpers[name] != nil {
		panic(fmt.Sprintf("testutil: helper %q registered twice or unnamed", name))
	}
	helpers[name] = helper
}

// Main is a package's TestMain: in a process started as a helper it runs
// that helper and exits with its code (2 for a name nobody registered),
// running no test; otherwise it runs the tests and exits with their code.
func Main(m *testing.M) {
	if name, ok := os.LookupEnv(HelperEnv); ok {
		h := helpers[name]
		if h == nil {
			known := make([]string, 0, len(helpers))
			for n := range helpers {
				known = append(known, n)
			}
			sort.Strings(known)
			fmt.Fprintf(os.Stderr, "testutil: no helper %q registered (have %s)\n", name, strings.Join(known, ", "))
			os.Exit(2)
		}
		os.Exit(h(os.Getenv(HelperArgEnv)))
	}
	code := m.Run()
	// Whatever the tests ran, the host's /dev/null is still the null
	// device (once, in a session, it was found replaced by a run-owned
	// file, cause unknown): a package that breaks it fails.
	if err := NullDeviceIntact("/dev/null"); err != nil && code == 0 {
		fmt.Fprintf(os.Stderr, "testutil: after this package's tests: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// HelperEnviron is the environment entries that start helper name with
// arg, to append to a command's environment.
func HelperEnviron(name, arg string) []string {
	return []string{HelperEnv + "=" + name, HelperArgEnv + "=" + arg}
}

// HelperCommand is a command that runs this test binary as helper name
// with arg, in this process's environment, running no test.
func HelperCommand(name, arg string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), HelperEnviron(name, arg)...)
	return cmd
}

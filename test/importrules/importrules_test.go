// Package importrules enforces the import rules of sandbox/doc.go on the
// module's own packages, as `go list` reports them.
package importrules

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/psych-runtime/psych"

type pkg struct {
	ImportPath string
	Deps       []string
	Imports    []string
}

func list(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func under(path string, dirs ...string) bool {
	for _, d := range dirs {
		if path == module+"/"+d || strings.HasPrefix(path, module+"/"+d+"/") {
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	pkgs := list(t)
	checked := 0
	for path, p := range pkgs {
		// Nothing of the sandbox reaches the root package (the tool path).
		if under(path, "sandbox", "bootstrap", "nsexec", "cgroups", "seccomp", "netns", "internal/reexec") {
			checked++
			for _, d := range p.Deps {
				if d == module {
					t.Errorf("%s depends on the root package %s", path, module)
				}
			}
		}
		// sandbox itself links none of its backends.
		if path == module+"/sandbox" {
			for _, d := range p.Deps {
				if under(d, "sandbox/subprocess", "sandbox/container") {
					t.Errorf("sandbox depends on its backend %s", d)
				}
			}
		}
		// The shared host core links neither backend, and neither backend
		// the other.
		if under(path, "sandbox/internal") {
			for _, d := range p.Deps {
				if under(d, "sandbox/subprocess", "sandbox/container") {
					t.Errorf("the host core %s depends on the backend %s", path, d)
				}
			}
		}
		if under(path, "sandbox/subprocess") && slices.ContainsFunc(p.Deps, func(d string) bool { return under(d, "sandbox/container") }) ||
			under(path, "sandbox/container") && slices.ContainsFunc(p.Deps, func(d string) bool { return under(d, "sandbox/subprocess") }) {
			t.Errorf("backend %s depends on the other backend", path)
		}
		// The tool path links neither a backend nor the SQLite store: a
		// user who records nothing never links SQLite.
		if path == module {
			for _, d := range p.Deps {
				if under(d, "sandbox/subprocess", "sandbox/container", "store") || strings.HasPrefix(d, "modernc.org/") {
					t.Errorf("the root package depends on %s", d)
				}
			}
		}
		// psych's own command links no container backend, no gRPC, no
		// SQLite and no psych.Runtime: its start-up is the cold path's
		// (internal/cli, the run command's lean form); psych-full has
		// them, in cmd/internal/full and the commands only it has.
		if path == module+"/cmd/psych" || under(path, "internal/cli", "cmd/internal/commands/run") {
			for _, d := range p.Deps {
				if d == module || under(d, "sandbox/container", "internal/doctor", "internal/bench", "cmd/internal/full", "cmd/internal/commands/runs", "cmd/internal/commands/doctor", "cmd/internal/commands/bench", "store/sqlite", "egress") || strings.HasPrefix(d, "google.golang.org/grpc") || strings.HasPrefix(d, "github.com/containerd/") || strings.HasPrefix(d, "modernc.org/") {
					t.Errorf("%s depends on %s", path, d)
				}
			}
		}
		// The runner knows no command: the commands are the binaries'
		// tables.
		if under(path, "internal/cli") {
			for _, d := range p.Deps {
				if under(d, "cmd") {
					t.Errorf("%s depends on the command %s", path, d)
				}
			}
		}
		// The test support is for tests: only _test.go files and the
		// packages under test/ import internal/testutil, so no production
		// package links it.
		if !under(path, "test", "internal/testutil") {
			for _, d := range p.Deps {
				if under(d, "internal/testutil") {
					t.Errorf("%s depends on the test support %s", path, d)
				}
			}
		}
		// The API's client imports sandbox, api and the leaf
		// internal/jsonfold only (the lean psych links it): never the root package, a backend, the server,
		// containerd, gRPC, SQLite or prometheus.
		if under(path, "client") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module) && !under(d, "sandbox", "api", "client", "internal/jsonfold") || under(d, "sandbox/subprocess", "sandbox/container", "sandbox/internal") ||
					strings.HasPrefix(d, "github.com/containerd/") || strings.HasPrefix(d, "google.golang.org/grpc") || strings.HasPrefix(d, "modernc.org/") || strings.HasPrefix(d, "github.com/prometheus/") {
					t.Errorf("%s depends on %s", path, d)
				}
			}
		}
		// The trusted-file cache knows nothing of what it holds: of this
		// module it imports the EINTR retry alone.
		if under(path, "sandbox/internal/trustcache") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module) && !under(d, "internal/eintr") {
					t.Errorf("%s depends on %s", path, d)
				}
			}
		}
		// The leaves import nothing of this module.
		if under(path, "cgroups", "seccomp", "netns", "egress", "internal/echofloor", "internal/jsonfold", "internal/eintr") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, module) {
					t.Errorf("leaf %s depends on %s", path, d)
				}
			}
		}
	}
	// A positive control: the lists are real.
	if sub := pkgs[module+"/sandbox/subprocess"]; !slices.Contains(sub.Deps, module+"/cgroups") {
		t.Fatalf("go list shows no dependency of sandbox/subprocess on cgroups: %v", sub.Deps)
	}
	if sub := pkgs[module+"/sandbox/subprocess"]; !slices.Contains(sub.Deps, module+"/sandbox/internal/host") {
		t.Fatalf("go list shows no dependency of sandbox/subprocess on the host core: %v", sub.Deps)
	}
	if root := pkgs[module]; !slices.Contains(root.Deps, module+"/sandbox") || !slices.Contains(pkgs[module+"/store/sqlite"].Deps, "modernc.org/sqlite") {
		t.Fatalf("go list shows no dependency of the root package on sandbox, or of store/sqlite on modernc.org/sqlite")
	}
	if eng := pkgs[module+"/cmd/psych-full"]; !slices.Contains(eng.Deps, module+"/sandbox/container") || !slices.Contains(eng.Deps, module) || !slices.Contains(eng.Deps, module+"/cmd/internal/full") ||
		!slices.Contains(pkgs[module+"/cmd/psych"].Deps, module+"/internal/cli") || !slices.Contains(pkgs[module+"/cmd/psych"].Deps, module+"/cmd/internal/commands/run") {
		t.Fatalf("go list shows no dependency of cmd/psych-full on sandbox/container, the root package or cmd/internal/full, or of cmd/psych on internal/cli or the run command")
	}
	if tu, ok := pkgs[module+"/internal/testutil"]; !ok || !slices.Contains(tu.Deps, "os/exec") {
		t.Fatalf("go list shows no internal/testutil, or no dependency of it on os/exec")
	}
	if !slices.Contains(pkgs[module+"/sandbox/internal/pyfacts"].Deps, module+"/sandbox/internal/trustcache") || !slices.Contains(pkgs[module+"/sandbox/internal/trustcache"].Deps, module+"/internal/eintr") {
		t.Fatalf("go list shows no dependency of pyfacts on the trusted-file cache, or of it on internal/eintr")
	}
	if !slices.Contains(pkgs[module+"/client"].Deps, module+"/api") {
		t.Fatalf("go list shows no dependency of client on api")
	}
	if checked < 7 {
		t.Fatalf("checked only %d sandbox packages", checked)
	}
}

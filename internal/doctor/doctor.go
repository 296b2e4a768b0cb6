// Package doctor checks what this host gives psych's sandbox, one check at a
// time, and then runs one fully isolated execution to report what a run
// actually got: `psych doctor`.
//
// Each Check has a status, what was found, and the fix. The statuses follow
// one rule, so that CI can gate on Report.Failed:
//
//   - FAIL: the subprocess backend cannot give full isolation here. A layer
//     is missing (user, network, mount or pid namespaces, seccomp), the
//     kernel is older than psych's floor (5.12), no interpreter the run user
//     can execute was found, or the isolated execution did not run or did not
//     attest every layer. With Options.RequireCgroup, a missing per-run cgroup
//     FAILs too.
//   - WARN: psych runs fully isolated, with less than it could have: Landlock
//     below ABI 6 (no scoping of abstract Unix sockets and signals), no
//     per-run cgroup (rlimits alone hold), an interpreter reached through a
//     shim, a kernel without the cgroup peak counters (before 6.1), an
//     unreachable container engine or a missing image.
//   - OK: everything else.
//
// What the checks observe comes from real attempts where one can be made:
// clones into fresh namespaces, psych's own user-namespace probe as the run
// user (the one every subprocess.New makes), cgroups.NewManager, the
// compilation of psych's seccomp filter, container.New per engine, and the
// execution itself through subprocess.New, whose attestation
// (sandbox.Isolation) is the report's. The sysctls are read to explain a
// failure and to choose its fix, never instead of the attempt.
//
// Running the doctor has the side effects a first run has: the cgroup
// parents and psych's run directories are created, and what dead hosts left
// behind is removed.
package doctor

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/psych-runtime/psych/sandbox"
)

// Statuses of a Check.
const (
	OK   = "OK"
	Warn = "WARN"
	Fail = "FAIL"
)

// Options configures a Run. The zero value checks the default interpreter
// and image.
type Options struct {
	// Python is the interpreter, as subprocess.Config.PythonBin takes it.
	// Empty: python3 on PATH, resolved to its sys.executable.
	Python string
	// RequireCgroup makes a missing per-run cgroup a FAIL rather than a WARN.
	RequireCgroup bool
	// Image is the container image to look for in each engine. Empty:
	// container.DefaultImage.
	Image string
}

// Check is the outcome of one check.
type Check struct {
	// Name identifies the check: "kernel", "userns", "netns", "mntns",
	// "pidns", "cgroups", "seccomp", "landlock", "python",
	// "engine/<engine>", "run".
	Name string `json:"name"`
	// Status is OK, WARN or FAIL.
	Status string `json:"status"`
	// Found says what was observed.
	Found string `json:"found"`
	// Fix says what to do; empty for OK. It may span several lines (an
	// AppArmor profile, for one).
	Fix string `json:"fix"`
}

// Report is what Run found.
type Report struct {
	// Checks are in a fixed order, the isolated execution ("run") last.
	Checks []Check `json:"checks"`
	// Attestation is the isolated execution's sandbox.Isolation; nil when it
	// could not run.
	Attestation *sandbox.Isolation `json:"attestation"`
}

// Failed reports whether any check FAILed: the subprocess backend cannot
// give full isolation here (or, with RequireCgroup, no per-run cgroup).
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// Run runs every check, in order, then the isolated execution. It does not
// fail: what cannot be checked is a check's finding. ctx bounds the
// interpreter's starts, the engines' checks and the execution.
func Run(ctx context.Context, opts Options) Report {
	return run(ctx, opts)
}

// WriteText writes the report for people: one line per check, "STATUS
// name found — fix", with a fix's further lines indented below it, then a
// summary of the attestation.
func (r *Report) WriteText(w io.Writer) error {
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	var b strings.Builder
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %-*s  %s", c.Status, width, c.Name, strings.Join(strings.Fields(c.Found), " "))
		if c.Fix != "" {
			lines := strings.Split(c.Fix, "\n")
			fmt.Fprintf(&b, " — %s", lines[0])
			for _, l := range lines[1:] {
				fmt.Fprintf(&b, "\n        %s", l)
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	writeAttestation(&b, r.Attestation)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeAttestation(b *strings.Builder, iso *sandbox.Isolation) {
	if iso == nil {
		b.WriteString("attestation: none (the isolated execution did not run)\n")
		return
	}
	network := "granted"
	if n := iso.Network; n != nil {
		network = fmt.Sprintf("verified=%v, links %s", n.Verified, strings.Join(n.Links, ","))
		if n.Reason != "" {
			network += " (" + n.Reason + ")"
		}
	}
	landlock := "none"
	if len(iso.LandlockScoped) > 0 {
		landlock = strings.Join(iso.LandlockScoped, ", ")
	}
	fmt.Fprintf(b, "attestation of the isolated execution (%s backend):\n", iso.Backend)
	lines := [][2]string{
		{"mode", iso.Mode},
		{"namespaces", strings.Join(iso.Namespaces, " ")},
		{"uid_map", fmt.Sprintf("%q, gid_map %q", iso.UIDMap, iso.GIDMap)},
		{"init", processLine(iso.Init)},
		{"interpreter", processLine(iso.Interpreter)},
		{"seccomp", iso.SeccompDigest},
		{"landlock", landlock},
		{"network", network},
		{"cgroup", fmt.Sprintf("%s, freezable=%v", iso.Cgroup, iso.Freezable)},
		{"python", iso.PythonPath},
		{"env", strings.Join(iso.EnvKeys, " ")},
	}
	for _, l := range lines {
		fmt.Fprintf(b, "  %-12s %s\n", l[0], l[1])
	}
}

func processLine(p sandbox.ProcessStatus) string {
	return fmt.Sprintf("uid %v, seccomp %d (%d filters), no_new_privs %d, cap_eff %s, cap_bnd %s",
		p.UID, p.Seccomp, p.SeccompFilters, p.NoNewPrivs, p.CapEff, p.CapBnd)
}

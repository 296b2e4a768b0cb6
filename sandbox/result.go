package sandbox

import (
	"encoding/json"
	"time"
)

// Result is what one execution produced. Every field comes from the host's
// own observation except Value and the program-reported parts of Failure.
type Result struct {
	// ID is the execution's id: the Request's, or the one the backend made.
	ID string `json:"id"`
	// Stdout and Stderr are decoded as UTF-8 with replacement and capped;
	// the host keeps draining past the cap so the child never blocks.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	// Value is what the program's last statement evaluated to, if it was
	// an expression, as JSON. Nil (JSON null) when there was none and when
	// it was None: JSON does not tell them apart, so neither do we.
	Value json.RawMessage `json:"value"`
	// Failure is nil on success.
	Failure *Failure `json:"failure"`
	// Duration is the wall time from start to exit, suspended time
	// included.
	Duration time.Duration `json:"-"`
	// Suspended is how long the run was frozen while binding calls waited
	// for a person (Suspend); its wall clock did not run meanwhile.
	// Limits.ApprovalSeconds caps it.
	Suspended time.Duration `json:"-"`
	// LimitHit names the cap that ended the execution; empty when none did.
	LimitHit LimitName `json:"limit_hit"`
	// LimitSource says what LimitHit rests on: "host" (the host's own timer
	// or CPU watch fired), "kernel" (a signal or counter the kernel
	// reported) or "program" (only the program's own report, such as an
	// uncaught MemoryError, backs it). Empty when LimitHit is.
	LimitSource string `json:"limit_source,omitempty"`
	// NetworkDenied is true only when this execution's own denial of the
	// network was verified.
	NetworkDenied bool `json:"network_denied"`
	// Usage is what the whole run consumed, measured by its cgroup: the
	// evidence behind LimitHit. Nil when the backend measured nothing.
	Usage *Usage `json:"usage"`
	// Isolation is what this run actually had, from kernel interfaces.
	// Nil only when the backend has nothing to attest.
	Isolation *Isolation `json:"isolation"`
	// Files are the regular files of WorkDir the run created or changed
	// (by SHA-256 against Request.Files), collected from the host's side
	// after every process of the run was dead, sorted by path.
	// FilesOmitted lists every entry a cap or its kind kept out, with why,
	// and FilesTruncated is then true: nothing is dropped silently.
	Files          []OutFile `json:"files,omitempty"`
	FilesOmitted   []Omitted `json:"files_omitted,omitempty"`
	FilesTruncated bool      `json:"files_truncated,omitempty"`
	// Artifacts are the program's matplotlib figures, as PNGs the host
	// validated itself, sorted by name (see FiguresDir). ArtifactsOmitted
	// lists each one a cap or its validation kept out, with why (Omitted's
	// Path is then its name): nothing is dropped silently.
	Artifacts        []Artifact `json:"artifacts,omitempty"`
	ArtifactsOmitted []Omitted  `json:"artifacts_omitted,omitempty"`
}

// FiguresDir is where, inside a run whose host collects figures, the
// bootstrap writes the program's matplotlib figures: on the run's tmpfs,
// outside WorkDir. The program can write there too; the host takes
// nothing from it but PNGs named figure-N.png or figure-N-K.png that it
// validated itself.
const FiguresDir = "/tmp/.psych-figures"

// Artifact is one figure of a run (Result.Artifacts): Name is
// "figure-N.png" (N the matplotlib figure number) or "figure-N-K.png" for
// its K-th capture; Width and Height are the PNG's own, read by the host.
type Artifact struct {
	Name   string `json:"name"`
	MIME   string `json:"mime"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Data   []byte `json:"data"`
}

// MIMEPNG is an Artifact's MIME type.
const MIMEPNG = "image/png"

// Usage is what a whole run consumed, all its processes together.
type Usage struct {
	CPUSeconds float64 `json:"cpu_seconds"`
	// PeakMemoryBytes is the run's memory high-water mark.
	PeakMemoryBytes int64 `json:"peak_memory_bytes"`
	// PeakProcesses is the most processes and threads the program had at
	// once, the sandbox's own init not counted.
	PeakProcesses int64 `json:"peak_processes"`
	// OOMKills counts the run's processes that the kernel's OOM killer
	// ended at the memory limit. A run whose result arrived first
	// completed, and reports its OOM kills only here (LimitHit is not
	// memory_bytes); one that ended without its result has LimitHit
	// memory_bytes. Zero where the run had no memory cgroup.
	OOMKills int64 `json:"oom_kills"`
	// HostCallSeconds is the wall time the host spent in the run's
	// binding calls (Bindings.Call), all together: work the program's CPU
	// budget does not see, a person's approval wait included (which
	// Suspended tells apart). Measured by the host, never by a frame;
	// with calls but no cgroup, Usage holds only this.
	HostCallSeconds float64 `json:"host_call_seconds"`
}

// Evidence behind a LimitHit.
const (
	SourceHost    = "host"
	SourceKernel  = "kernel"
	SourceProgram = "program"
)

type resultJSON Result

// MarshalJSON adds duration_seconds.
func (r Result) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		resultJSON
		DurationSeconds  float64 `json:"duration_seconds"`
		SuspendedSeconds float64 `json:"suspended_seconds"`
	}{resultJSON(r), r.Duration.Seconds(), r.Suspended.Seconds()})
}

// UnmarshalJSON reads duration_seconds back into Duration, and a null
// value as a nil Value, as the backends leave it.
func (r *Result) UnmarshalJSON(b []byte) error {
	var v struct {
		resultJSON
		DurationSeconds  float64 `json:"duration_seconds"`
		SuspendedSeconds float64 `json:"suspended_seconds"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Result(v.resultJSON)
	if string(r.Value) == "null" { // as the backends leave it: nil
		r.Value = nil
	}
	r.Duration = time.Duration(v.DurationSeconds * float64(time.Second))
	r.Suspended = time.Duration(v.SuspendedSeconds * float64(time.Second))
	return nil
}

// Failure describes how the program failed.
type Failure struct {
	// Type is the Python exception class (for example "ZeroDivisionError",
	// "SystemExit"), or one of the Failure… kinds when the host saw the
	// failure rather than the program.
	Type    string `json:"type"`
	Message string `json:"message"`
	// Traceback reads as under `python prog.py`: the program's own line
	// numbers and source lines, no bootstrap frames.
	Traceback string `json:"traceback"`
	// ExitCode is the interpreter's exit status; nil when a signal ended it.
	ExitCode *int `json:"exit_code"`
	// Signal names the signal that ended the interpreter ("SIGSEGV").
	Signal SignalName `json:"signal"`
}

// Failure types the host assigns.
const (
	// FailureExit: the interpreter exited without sending a result.
	FailureExit = "Exit"
	// FailureSignal: a signal ended the interpreter before a result.
	FailureSignal = "Signal"
	// FailureWallTimeout: the wall limit ended the run.
	FailureWallTimeout = "WallTimeout"
	// FailureCPUTimeout: the CPU limit ended the run.
	FailureCPUTimeout = "CPUTimeout"
	// FailureApprovalTimeout: the approval limit ended the run, which had
	// spent its ApprovalSeconds suspended.
	FailureApprovalTimeout = "ApprovalTimeout"
	// FailureProtocol: the program sent a malformed, oversized, unexpected
	// or duplicate frame, which ended the run.
	FailureProtocol = "ProtocolError"
)

// SignalName is a signal's name such as "SIGKILL"; empty encodes as null.
type SignalName string

// MarshalJSON encodes the empty name as null.
func (s SignalName) MarshalJSON() ([]byte, error) {
	return LimitName(s).MarshalJSON()
}

// UnmarshalJSON accepts null as the empty name.
func (s *SignalName) UnmarshalJSON(b []byte) error {
	return (*LimitName)(s).UnmarshalJSON(b)
}

// Isolation is the attestation of one execution: what the kernel reported
// for this run's own processes, collected by the host before the program
// started. It never comes from a frame.
type Isolation struct {
	// Backend is "subprocess" or "container".
	Backend string `json:"backend"`
	// Engine is the container engine ("containerd", "podman", "docker");
	// empty for the subprocess backend.
	Engine string `json:"engine,omitempty"`
	// Host is the node name (uname's nodename) of the host process that
	// ran the run: the machine, or the pod, whatever client asked for it.
	Host string `json:"host"`
	// Image is the container image the run had; nil for the subprocess
	// backend.
	Image *Image `json:"image,omitempty"`
	// Mode is "namespaces" (the full design), or "fallback" where no user
	// namespace could be had and the fallback was asked for: rlimits, the
	// uid drop, seccomp and Landlock only (LandlockFS, InetRefused); or
	// "partial" in psych's own benchmark, which takes layers away to
	// measure them (no public option can).
	Mode string `json:"mode"`
	// Namespaces lists the namespaces the interpreter does not share with
	// the host ("user", "mnt", "net", "pid", "ipc", "uts", "cgroup").
	Namespaces []string `json:"namespaces"`
	// UIDMap and GIDMap are the interpreter's /proc maps, one "inside
	// outside count" line each; empty outside a user namespace.
	UIDMap string `json:"uid_map"`
	GIDMap string `json:"gid_map"`
	// LandlockScoped lists the Landlock scopes the run is confined by
	// ("abstract_unix_socket", "signal"); empty where the kernel lacks ABI 6.
	LandlockScoped []string `json:"landlock_scoped"`
	// LandlockFS lists, in a fallback run confined by Landlock (ABI 1+),
	// the only paths the program may reach, each "PATH:r" (read), "PATH:rx"
	// (and execute) or "PATH:rw" (and write), its own directory (HOME,
	// TMPDIR, the working directory) as "$HOME"; empty where files are not
	// confined (a view confines them, or the kernel lacks Landlock).
	LandlockFS []string `json:"landlock_fs,omitempty"`
	// InetRefused says the filter refused IPv4 and IPv6 sockets: a
	// fallback run without a network namespace whose request did not grant
	// the network. NetworkDenied stays false: nothing was verified.
	InetRefused bool `json:"inet_refused,omitempty"`
	// SeccompDigest names the filter the host compiled and the init loaded.
	SeccompDigest string `json:"seccomp_digest"`
	// Init and Interpreter are the two processes' /proc status as the
	// host read it.
	Init        ProcessStatus `json:"init"`
	Interpreter ProcessStatus `json:"interpreter"`
	// Network is the verification of the run's own network namespace;
	// nil when the network was granted.
	Network *NetworkCheck `json:"network"`
	// Cgroup is "v2", "v1" or "none" (rlimits alone hold).
	Cgroup string `json:"cgroup"`
	// Freezable says the backend could freeze this run while a binding
	// call waited for a person (Suspend); false where it could not.
	Freezable bool `json:"freezable"`
	// PythonPath is the interpreter's path as the run executed it (for a
	// container, inside its image).
	PythonPath string `json:"python_path"`
	// EnvKeys are the names of the variables the program's environment
	// was built from, sorted; never their values.
	EnvKeys []string `json:"env_keys"`
	// Limits are the interpreter's rlimits as the kernel reports them
	// (/proc/PID/limits), "soft hard" by short name: cpu, as, fsize,
	// nproc, nofile, stack, core.
	Limits map[string]string `json:"limits,omitempty"`
	// RootMount is the mount the interpreter sees as its root
	// (/proc/PID/mountinfo): "own:tmpfs" under a view of its own,
	// "host:FSTYPE" where it shares the host's root.
	RootMount string `json:"root_mount,omitempty"`
	// FilesOut says the host collected what the run left in WorkDir and
	// its figures (Result.Files, Artifacts). It is false where the host
	// holds no handle on the run's tmpfs (a subprocess host that is not
	// root, or its Landlock fallback): nothing the run wrote comes back,
	// and nothing is listed as omitted.
	FilesOut bool `json:"files_out"`
	// Warm says the run was served by a sandbox of the backend's warm pool
	// (PoolConfig), started AgeSeconds before dispatch. ColdReason says
	// why a backend with a pool ran this request cold; empty without one.
	Warm       bool    `json:"warm"`
	AgeSeconds float64 `json:"age_seconds,omitempty"`
	ColdReason string  `json:"cold_reason,omitempty"`
}

// Image names a container image: the reference it was asked for by and the
// digest the engine resolved it to.
type Image struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
}

// ProcessStatus is the security state of one process, from its
// /proc/PID/status.
type ProcessStatus struct {
	// UID and GID are real, effective, saved and filesystem ids, as the
	// host sees them.
	UID []int `json:"uid"`
	GID []int `json:"gid"`
	// Seccomp is 2 when a filter is installed; SeccompFilters counts them.
	Seccomp        int `json:"seccomp"`
	SeccompFilters int `json:"seccomp_filters"`
	// NoNewPrivs is 1 when set.
	NoNewPrivs int `json:"no_new_privs"`
	// CapEff and CapBnd are the effective and bounding sets, in hex.
	CapEff string `json:"cap_eff"`
	CapBnd string `json:"cap_bnd"`
}

// NetworkCheck is the host's verification, through netlink, that the run's
// own network namespace holds nothing but loopback.
type NetworkCheck struct {
	// Verified is true only when every check passed.
	Verified bool     `json:"verified"`
	Links    []string `json:"links"`
	// Reason says what failed; empty when Verified.
	Reason string `json:"reason,omitempty"`
}

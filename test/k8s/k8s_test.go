//go:build k8s

package k8s

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psych-runtime/psych/api"
	"github.com/psych-runtime/psych/client"
	"github.com/psych-runtime/psych/internal/testutil"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/test/contract"
)

const (
	namespace = "psych"
	apiPort   = 8080
	metrics   = 9090
)

// lane is the deployment every test shares, made once by deploy.
var lane struct {
	once  sync.Once
	err   error
	token string
	repo  string
}

// kubectl runs the lane's kubectl and returns its stdout.
func kubectl(ctx context.Context, args ...string) ([]byte, error) {
	bin := os.Getenv("PSYCH_K8S_KUBECTL")
	if bin == "" {
		bin = "kubectl"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

func mustKubectl(t testing.TB, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scaled(5*time.Minute))
	defer cancel()
	out, err := kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deployed applies deploy/kubernetes once (the namespace, the token's
// Secret, then the base through test/k8s/overlay, which raises two caps
// for the contract cases) and waits for both pods to be Ready.
func deployed(t testing.TB) {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" {
		testutil.Unavailable(t, "no cluster: KUBECONFIG is not set (make k8s-test starts one)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scaled(2*time.Second))
	_, err := kubectl(ctx, "get", "--raw", "/readyz")
	cancel()
	if err != nil {
		testutil.Unavailable(t, "no cluster answers: %v", err)
	}
	lane.once.Do(func() { lane.err = deploy() })
	if lane.err != nil {
		t.Fatal(lane.err)
	}
}

func deploy() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	lane.repo = filepath.Join(wd, "..", "..")
	b := make([]byte, 24)
	rand.Read(b)
	lane.token = hex.EncodeToString(b)
	tok := filepath.Join(os.TempDir(), "psych-k8s-token-"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(tok, []byte(lane.token+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(tok)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scaled(10*time.Minute))
	defer cancel()
	start := time.Now()
	// A server reads its token at start: pods of an earlier apply restart
	// onto this run's Secret. A first apply's pods are new and read it
	// anyway: restarting them would start every pod twice.
	earlier, err := kubectl(ctx, "-n", namespace, "get", "deployment", "psych", "--ignore-not-found", "-o", "name")
	if err != nil {
		return err
	}
	steps := [][]string{
		{"apply", "-f", filepath.Join(lane.repo, "deploy/kubernetes/namespace.yaml")},
		{"-n", namespace, "delete", "secret", "psych-token", "--ignore-not-found"},
		{"-n", namespace, "create", "secret", "generic", "psych-token", "--from-file=token=" + tok},
		// deploy/kubernetes with the contract suite's caps (overlay/).
		{"apply", "-k", filepath.Join(lane.repo, "test/k8s/overlay")},
	}
	if len(bytes.TrimSpace(earlier)) > 0 {
		steps = append(steps, []string{"-n", namespace, "rollout", "restart", "deployment/psych"})
	}
	steps = append(steps, []string{"-n", namespace, "rollout", "status", "deployment/psych", "--timeout=" + testutil.Scaled(8*time.Minute).String()})
	for _, args := range steps {
		if _, err := kubectl(ctx, args...); err != nil {
			if out, derr := kubectl(ctx, "-n", namespace, "describe", "pods"); derr == nil {
				return fmt.Errorf("%w\n%s", err, out)
			}
			return err
		}
	}
	fmt.Printf("k8s: kubectl apply -k to both pods Ready: %.1f s\n", time.Since(start).Seconds())
	return nil
}

// pod is one Ready endpoint of the Service.
type pod struct{ Name, IP string }

// endpoints are the Service's Ready endpoints, from its EndpointSlices.
func endpoints(t testing.TB) []pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scaled(time.Minute))
	defer cancel()
	pods, err := readEndpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func readEndpoints(ctx context.Context) ([]pod, error) {
	var slices struct {
		Items []struct {
			Endpoints []struct {
				Addresses  []string `json:"addresses"`
				Conditions struct {
					Ready *bool `json:"ready"`
				} `json:"conditions"`
				TargetRef struct {
					Name string `json:"name"`
				} `json:"targetRef"`
			} `json:"endpoints"`
		} `json:"items"`
	}
	out, err := kubectl(ctx, "-n", namespace, "get", "endpointslices", "-l", "kubernetes.io/service-name=psych", "-o", "json")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(out, &slices); err != nil {
		return nil, fmt.Errorf("endpointslices: %w", err)
	}
	var pods []pod
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready && len(e.Addresses) > 0 {
				pods = append(pods, pod{Name: e.TargetRef.Name, IP: e.Addresses[0]})
			}
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

// readyPods waits until the Service has n Ready endpoints and returns them.
func readyPods(t testing.TB, n int) []pod {
	t.Helper()
	var pods []pod
	testutil.WaitFor(t, testutil.Scaled(5*time.Minute), fmt.Sprintf("%d Ready endpoints", n), func() bool {
		pods = endpoints(t)
		return len(pods) == n
	})
	return pods
}

func (p pod) client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(fmt.Sprintf("tcp://%s:%d", p.IP, apiPort), client.Options{Token: lane.token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDeploy: kubectl apply -k deploy/kubernetes, both pods Ready, each
// pod's /v1/info with its doctor's report (no FAIL) and its self-check's
// attestation, and a token-less request refused.
func TestDeploy(t *testing.T) {
	deployed(t)
	pods := readyPods(t, 2)
	for _, p := range pods {
		info, err := p.client(t).Info(context.Background())
		if err != nil {
			t.Fatalf("%s: info: %v", p.Name, err)
		}
		if info.Doctor == nil || info.Doctor.Failed || info.SelfCheck == nil || info.SelfCheck.Host != p.Name ||
			info.SelfCheck.Network == nil || !info.SelfCheck.Network.Verified {
			b, _ := json.Marshal(info)
			t.Fatalf("%s: info %s: want a doctor without FAIL and a self-check on the pod, network verified", p.Name, b)
		}
		resp, err := http.Get(fmt.Sprintf("http://%s:%d/v1/info", p.IP, apiPort))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: a request without the token: %d, want 401", p.Name, resp.StatusCode)
		}
	}
}

// cases are the contract suite's cases each pod runs: values, tracebacks,
// limits, bindings (with a client tool: the Bindings answer through the
// stream), suspension and the approval limit, hostile programs, the
// network and the attestation, and the host.
var cases = []string{"Values", "FailureTraceback", "TracebackShowsSource", "SyntaxError",
	"CPULimit", "WallLimit", "AddressSpace", "FileSize", "ThreadBomb",
	"Bindings", "BindingError", "BindingLoop", "Suspend", "ApprovalLimit",
	"Hostile", "ForgedResult", "CallFlood", "NetworkEmpty", "DenialProbes", "Attestation", "Host"}

// TestContractOnPods: the named contract cases through each pod's API,
// each result naming that pod in isolation.host.
func TestContractOnPods(t *testing.T) {
	deployed(t)
	for _, p := range readyPods(t, 2) {
		t.Run(p.Name, func(t *testing.T) {
			contract.Run(t, contract.Backend{
				New: func(t *testing.T, _ contract.Options) sandbox.Sandbox {
					sb := p.client(t).Sandbox()
					t.Cleanup(func() { sb.Close() })
					return sb
				},
				SandboxEnv: []string{"MALLOC_ARENA_MAX", "LC_ALL"},
				Host:       p.Name,
				Cases:      cases,
				Warm:       true,
			})
		})
	}
}

// run sends one run to p and returns its result or error.
func run(ctx context.Context, sb *client.Sandbox, code string) (*sandbox.Result, error) {
	return sb.Run(ctx, sandbox.Request{Code: code})
}

// TestSpread: runs sent over both endpoints come back each naming the pod
// that ran it, and both pods ran some.
func TestSpread(t *testing.T) {
	deployed(t)
	pods := readyPods(t, 2)
	seen := map[string]int{}
	for i := range 8 {
		p := pods[i%len(pods)]
		res, err := run(context.Background(), p.client(t).Sandbox(), "import socket\nsocket.gethostname()")
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		if res.Isolation == nil || res.Isolation.Host != p.Name {
			t.Fatalf("a run sent to %s names %+v", p.Name, res.Isolation)
		}
		seen[res.Isolation.Host]++
	}
	if len(seen) != 2 {
		t.Fatalf("runs by pod %v: want both", seen)
	}
}

// runsTotal sums psych_runs_total over its labels on p's /metrics.
func runsTotal(t testing.TB, p pod) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s:%d/metrics", p.IP, metrics))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: /metrics: %d", p.Name, resp.StatusCode)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "psych_runs_total{") && !strings.HasPrefix(line, "psych_runs_total ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("%s: %q", p.Name, line)
		}
		sum += v
		found = true
	}
	if !found && sum != 0 {
		t.Fatalf("%s: no psych_runs_total", p.Name)
	}
	return sum
}

// TestMetrics: each pod's /metrics, scraped as a Prometheus would (the
// pod's prometheus.io annotations name the port), counts exactly the runs
// the client sent it.
func TestMetrics(t *testing.T) {
	deployed(t)
	pods := readyPods(t, 2)
	ann := mustKubectl(t, "-n", namespace, "get", "pod", pods[0].Name, "-o", "jsonpath={.metadata.annotations.prometheus\\.io/port}")
	if string(ann) != strconv.Itoa(metrics) {
		t.Fatalf("the pod's prometheus.io/port is %q", ann)
	}
	for i, p := range pods {
		before := runsTotal(t, p)
		sb := p.client(t).Sandbox()
		n := 3 + 2*i
		for range n {
			if _, err := run(context.Background(), sb, "1"); err != nil {
				t.Fatal(err)
			}
		}
		if got := runsTotal(t, p) - before; got != float64(n) {
			t.Errorf("%s: psych_runs_total grew by %v, the client sent %d", p.Name, got, n)
		}
	}
}

// TestNetworkDenied: a run that tries the Kubernetes API (the Service's
// ClusterIP and the node's port), the node's kubelet, the other pod and
// the cloud metadata address gets an error from each, and its attestation
// shows its network verified: nothing but lo.
func TestNetworkDenied(t *testing.T) {
	deployed(t)
	pods := readyPods(t, 2)
	svc := strings.TrimSpace(string(mustKubectl(t, "-n", "default", "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}")))
	targets := []string{svc + ":443", "10.233.77.1:16443", "10.233.77.1:10250", "127.0.0.1:10250",
		pods[1].IP + ":" + strconv.Itoa(apiPort), "169.254.169.254:80"}
	code := "import socket, json\nout = {}\nfor t in " + pyList(targets) + ":\n" +
		"    h, p = t.rsplit(':', 1)\n    s = socket.socket()\n    s.settimeout(5)\n" +
		"    try:\n        s.connect((h, int(p)))\n        out[t] = 'connected'\n" +
		"    except OSError as e:\n        out[t] = type(e).__name__ + ': ' + str(e.errno)\n    finally:\n        s.close()\nout"
	res, err := run(context.Background(), pods[0].client(t).Sandbox(), code)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if res.Failure != nil || json.Unmarshal(res.Value, &got) != nil || len(got) != len(targets) {
		t.Fatalf("value %s, failure %+v", res.Value, res.Failure)
	}
	for _, tg := range targets {
		if got[tg] == "" || got[tg] == "connected" {
			t.Errorf("%s: %q, want an error", tg, got[tg])
		}
	}
	n := res.Isolation.Network
	if !res.NetworkDenied || n == nil || !n.Verified || len(n.Links) != 1 || n.Links[0] != "lo" {
		t.Errorf("network_denied %v, network %+v: want verified, lo alone", res.NetworkDenied, n)
	}
}

// TestPodNoRoute: from inside each pod (kubectl exec, through the
// apiserver to the node's kubelet), the pod's network has no default
// route, and a connection to an address off the machine (TEST-NET-1)
// fails at once with ENETUNREACH: nothing a pod sends can leave the
// machine. kubectl logs answers too (the server's JSON log).
func TestPodNoRoute(t *testing.T) {
	deployed(t)
	const probe = "import errno, json, socket\n" +
		"routes = [l.split()[:2] for l in open('/proc/net/route').read().splitlines()[1:] if l.strip()]\n" +
		"s = socket.socket()\ns.settimeout(5)\n" +
		"try:\n    s.connect(('192.0.2.1', 80))\n    out = 'connected'\n" +
		"except OSError as e:\n    out = errno.errorcode.get(e.errno, str(e))\n" +
		"print(json.dumps({'routes': routes, 'connect': out}))"
	for _, p := range readyPods(t, 2) {
		raw := mustKubectl(t, "-n", namespace, "exec", p.Name, "-c", "psych", "--", "python3", "-c", probe)
		var got struct {
			Routes  [][]string `json:"routes"`
			Connect string     `json:"connect"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("%s: %q: %v", p.Name, raw, err)
		}
		if len(got.Routes) == 0 {
			t.Fatalf("%s: no route at all: the probe read nothing", p.Name)
		}
		for _, r := range got.Routes {
			if len(r) < 2 || r[1] == "00000000" {
				t.Errorf("%s: a default route: %v", p.Name, r)
			}
		}
		if got.Connect != "ENETUNREACH" {
			t.Errorf("%s: connect to 192.0.2.1:80: %s, want ENETUNREACH", p.Name, got.Connect)
		}
		if logs := mustKubectl(t, "-n", namespace, "logs", p.Name, "-c", "psych", "--tail=5"); len(bytes.TrimSpace(logs)) == 0 {
			t.Errorf("%s: kubectl logs: nothing", p.Name)
		}
	}
}

func pyList(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// outcome is how one run of a load ended.
type outcome struct {
	pod  string
	res  *sandbox.Result
	err  error
	sent time.Time
}

// retryable: the run ended with its Result, or with an error a client
// retries on another pod: a refusal the API marks retryable (draining,
// not_ready, capacity), or the server gone before it answered.
func retryable(err error) bool {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Retryable
	}
	return errors.Is(err, client.ErrUnreachable)
}

// load keeps runs of code in flight on every Ready endpoint (re-read
// between runs) until stop, and returns how each ended.
func load(t *testing.T, code string, stop <-chan struct{}) <-chan []outcome {
	done := make(chan []outcome, 1)
	var mu sync.Mutex
	var outs []outcome
	var current struct {
		sync.Mutex
		pods []pod
	}
	refreshed := make(chan struct{})
	go func() { // the endpoints, re-read every second
		defer close(refreshed)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scaled(30*time.Second))
			pods, err := readEndpoints(ctx)
			cancel()
			if err == nil {
				current.Lock()
				current.pods = pods
				current.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	go func() {
		defer func() { <-refreshed }()
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					current.Lock()
					pods := current.pods
					current.Unlock()
					if len(pods) == 0 {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					p := pods[w%len(pods)]
					c, err := client.New(fmt.Sprintf("tcp://%s:%d", p.IP, apiPort), client.Options{Token: lane.token})
					if err != nil {
						t.Error(err)
						return
					}
					o := outcome{pod: p.Name, sent: time.Now()}
					ctx, cancel := context.WithTimeout(context.Background(), testutil.Scaled(3*time.Minute))
					o.res, o.err = run(ctx, c.Sandbox(), code)
					cancel()
					c.Close()
					mu.Lock()
					outs = append(outs, o)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		done <- outs
	}()
	return done
}

// check holds every outcome to its result or a retryable error.
func check(t *testing.T, outs []outcome) (results, retried int) {
	t.Helper()
	for _, o := range outs {
		switch {
		case o.err == nil && o.res.Failure == nil && string(o.res.Value) == `"done"` && o.res.Isolation.Host == o.pod:
			results++
		case o.err == nil:
			t.Errorf("a run on %s ended %s, failure %+v", o.pod, o.res.Value, o.res.Failure)
		case retryable(o.err):
			retried++
		default:
			t.Errorf("a run on %s sent at %s was lost: %v", o.pod, o.sent.Format(time.TimeOnly), o.err)
		}
	}
	return results, retried
}

// podUID is the pod's uid, which names its cgroups on the node.
func podUID(t testing.TB, name string) string {
	return strings.TrimSpace(string(mustKubectl(t, "-n", namespace, "get", "pod", name, "-o", "jsonpath={.metadata.uid}")))
}

// podCgroupsGone waits until no cgroup of the pod with uid is left on the
// node: its processes (psych serve and every run) are gone with it.
func podCgroupsGone(t testing.TB, uid string) {
	t.Helper()
	testutil.WaitFor(t, testutil.Scaled(3*time.Minute), "the old pod's cgroups removed", func() bool {
		m, _ := filepath.Glob("/sys/fs/cgroup/*/psych-k8s/*/*/pod" + uid)
		m2, _ := filepath.Glob("/sys/fs/cgroup/*/psych-k8s/*/pod" + uid)
		return len(m)+len(m2) == 0
	})
}

// TestRollingRestart: kubectl rollout restart with runs in flight on both
// pods: every run ends with its Result or a retryable error, none is lost;
// a run longer than the drain (--drain-timeout, 30 s) on each old pod ends
// with the server's retryable draining error; the old pods' cgroups
// (every process of their runs) are gone after.
func TestRollingRestart(t *testing.T) {
	deployed(t)
	old := readyPods(t, 2)
	var uids []string
	long := make(chan error, len(old))
	for _, p := range old {
		uids = append(uids, podUID(t, p.Name))
		sb := p.client(t).Sandbox()
		go func() {
			_, err := sb.Run(context.Background(), sandbox.Request{Code: "import time\ntime.sleep(300)", Limits: sandbox.Limits{WallSeconds: 110}})
			long <- err
		}()
	}
	stop := make(chan struct{})
	done := load(t, "import time\ntime.sleep(2)\n'done'", stop)
	time.Sleep(testutil.Scaled(3 * time.Second)) // runs in flight before the restart, not a sync
	mustKubectl(t, "-n", namespace, "rollout", "restart", "deployment/psych")
	mustKubectl(t, "-n", namespace, "rollout", "status", "deployment/psych", "--timeout="+testutil.Scaled(8*time.Minute).String())
	close(stop)
	outs := <-done
	for range old {
		select {
		case err := <-long:
			var e *api.Error
			if !errors.As(err, &e) || e.Code != api.CodeDraining || !e.Retryable {
				t.Errorf("a run past the old pod's drain ended with %v, want the server's retryable draining error", err)
			}
		case <-time.After(testutil.Scaled(2 * time.Minute)):
			t.Fatal("a run past the old pod's drain never ended")
		}
	}
	results, retried := check(t, outs)
	t.Logf("rolling restart: %d runs, %d results, %d retryable refusals", len(outs), results, retried)
	if results == 0 {
		t.Fatal("no run came back across the restart")
	}
	now := readyPods(t, 2)
	for _, p := range now {
		for _, o := range old {
			if p.Name == o.Name {
				t.Errorf("pod %s outlived the restart", p.Name)
			}
		}
	}
	for _, uid := range uids {
		podCgroupsGone(t, uid)
	}
}

// TestPodDeleted: a pod deleted (grace 1 s) with a run in flight: the
// run's client gets a retryable error, never a Result or silence; the
// Deployment's replacement becomes Ready, and the pod's cgroups are gone.
func TestPodDeleted(t *testing.T) {
	deployed(t)
	pods := readyPods(t, 2)
	victim := pods[0]
	uid := podUID(t, victim.Name)
	c := victim.client(t)
	errc := make(chan error, 1)
	go func() {
		_, err := run(context.Background(), c.Sandbox(), "import time\nprint('started', flush=True)\ntime.sleep(600)")
		errc <- err
	}()
	testutil.WaitFor(t, testutil.Scaled(time.Minute), "the run in flight", func() bool {
		runs, err := c.Runs(context.Background())
		return err == nil && len(runs) > 0
	})
	mustKubectl(t, "-n", namespace, "delete", "pod", victim.Name, "--grace-period=1", "--wait=false")
	select {
	case err := <-errc:
		if err == nil || !retryable(err) {
			t.Fatalf("the deleted pod's client got %v, want a retryable error", err)
		}
		t.Logf("the client got: %v", err)
	case <-time.After(testutil.Scaled(2 * time.Minute)):
		t.Fatal("the deleted pod's client got nothing")
	}
	now := readyPods(t, 2)
	for _, p := range now {
		if p.Name == victim.Name {
			t.Fatalf("the deleted pod %s is still an endpoint", p.Name)
		}
	}
	podCgroupsGone(t, uid)
}

// BenchmarkThroughput: runs of a small program through the Service's
// endpoints, GOMAXPROCS×2 at a time, with one replica and with two; it
// reports runs/s and the CPU each run cost the machine (user+sys of every
// process, from /proc/stat). On two cores the machine bounds it.
func BenchmarkThroughput(b *testing.B) {
	deployed(b)
	defer mustKubectl(b, "-n", namespace, "scale", "deployment/psych", "--replicas=2")
	for _, replicas := range []int{1, 2} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			mustKubectl(b, "-n", namespace, "scale", "deployment/psych", "--replicas="+strconv.Itoa(replicas))
			pods := readyPods(b, replicas)
			sbs := make([]*client.Sandbox, len(pods))
			for i, p := range pods {
				sbs[i] = p.client(b).Sandbox()
			}
			var next sync.Mutex
			i := 0
			cpu0 := machineCPU(b)
			b.ResetTimer()
			b.SetParallelism(2)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					next.Lock()
					sb := sbs[i%len(sbs)]
					i++
					next.Unlock()
					res, err := run(context.Background(), sb, "sum(range(1000))")
					if err != nil || res.Failure != nil {
						b.Errorf("%v %+v", err, res)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			b.ReportMetric((machineCPU(b)-cpu0)/float64(b.N)*1000, "cpu-ms/run")
		})
	}
}

// machineCPU is the CPU seconds every process of the machine spent (user,
// nice and system), from /proc/stat.
func machineCPU(b testing.TB) float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])
	var ticks float64
	for _, i := range []int{1, 2, 3} {
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / 100
}

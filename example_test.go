package psych_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/egress"
	"github.com/psych-runtime/psych/sandbox"
	"github.com/psych-runtime/psych/sandbox/subprocess"
	"github.com/psych-runtime/psych/store/sqlite"
)

// These examples are the README's and docs/tool-path.md's Go snippets,
// checked by the compiler; those with an Output line run under go test
// (they need /usr/bin/python3, as make test does).

// Example runs one program in a fully isolated sandbox and prints what it
// wrote and what its last line evaluated to. It is the README's first
// example.
func Example() {
	sb, err := subprocess.New(subprocess.Config{
		PythonBin:    "/usr/bin/python3",
		AllowSameUID: os.Geteuid() != 0, // a non-root host runs programs as itself
	})
	if err != nil {
		log.Fatal(err) // configuration: interpreter, run user, limits
	}
	defer sb.Close()
	res, err := sb.Run(context.Background(), sandbox.Request{
		Code:   "total = sum(range(10))\nprint(total)\ntotal * 2",
		Limits: sandbox.Limits{WallSeconds: 5}, // zero fields keep the defaults
	})
	if err != nil {
		log.Fatal(err) // the sandbox could not run (never a program failure)
	}
	fmt.Print(res.Stdout)
	fmt.Println(string(res.Value), res.Failure == nil)
	// Output:
	// 45
	// 90 true
}

// ExampleRuntime_Call calls one tool two ways: directly, as a model would,
// and from a program through run_code, where the tool is a plain Python
// function. Both calls take the same path (schema, Policy, record).
func ExampleRuntime_Call() {
	sb, err := subprocess.New(subprocess.Config{PythonBin: "/usr/bin/python3", AllowSameUID: os.Geteuid() != 0})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	reg := psych.NewRegistry()
	err = reg.Register(psych.Spec{
		Name: "search", Description: "Search the docs.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
		Handler: func(ctx context.Context, c psych.Call) (any, error) {
			var args struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(c.Args, &args); err != nil {
				return nil, err
			}
			return []string{"a page about " + args.Query}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := psych.New(psych.Config{Registry: reg, Sandbox: sb, Store: psych.NewMemoryStore()})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, s := range rt.Tools() {
		fmt.Println(s.Name) // run_code only because a Sandbox is set
	}
	direct, err := rt.Call(ctx, psych.Call{Tool: "search", Args: json.RawMessage(`{"query":"limits"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(direct.Kind, string(direct.Value))
	out, err := rt.Call(ctx, psych.Call{Tool: psych.RunCode, Args: json.RawMessage(`{"code":"search(query='limits')[0].upper()"}`)})
	if err != nil {
		log.Fatal(err)
	}
	var res sandbox.Result
	if err := json.Unmarshal(out.Value, &res); err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Kind, string(res.Value))
	// Output:
	// search
	// run_code
	// ok ["a page about limits"]
	// ok "A PAGE ABOUT LIMITS"
}

// ExampleNew is the whole tool path: a tool that reaches the network only
// through the egress seam, a ledger, an approver, a model's turn and a
// replay. It compiles only (it needs a model and the network).
func ExampleNew() {
	ctx := context.Background()
	sb, err := subprocess.New(subprocess.Config{PythonBin: "/usr/bin/python3"})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close()
	reg := psych.NewRegistry()
	err = reg.Register(psych.Spec{
		Name: "search", Description: "Search the docs.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
		Handler: func(ctx context.Context, c psych.Call) (any, error) {
			req, err := http.NewRequestWithContext(ctx, "GET", "https://docs.example.com/?q=...", nil)
			if err != nil {
				return nil, err
			}
			resp, err := psych.EgressFrom(ctx).Do(req) // the only way out
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			return resp.Status, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	eg, err := egress.New(egress.Config{Allow: []string{"docs.example.com"}})
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlite.Open("ledger.db") // psych.NewMemoryStore() for tests
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	approver := psych.ApproverFunc(func(ctx context.Context, req psych.ApprovalRequest) (psych.Approval, error) {
		return psych.Approval{Approved: false, By: "nobody", Reason: "ask a person here"}, nil
	})
	rt, err := psych.New(psych.Config{Registry: reg, Sandbox: sb, Store: st, Egress: eg, Approver: approver})
	if err != nil {
		log.Fatal(err)
	}
	_ = rt.Tools() // search, run_code (only because a Sandbox is set)
	out, err := rt.Call(ctx, psych.Call{Tool: "run_code", Args: json.RawMessage(`{"code":"search(query='x')"}`)})
	if err != nil {
		log.Fatal(err)
	}
	var msgs []psych.Message              // the conversation so far
	transcript, err := rt.Turn(ctx, msgs) // model → tool calls → results → model, with Config.Model
	if err != nil {
		log.Fatal(err)
	}
	var res sandbox.Result
	if err := json.Unmarshal(out.Value, &res); err != nil {
		log.Fatal(err)
	}
	rep, err := rt.Replay(ctx, res.ID, psych.ReplayOptions{}) // the program again, calls answered from the ledger
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(transcript), rep)
}

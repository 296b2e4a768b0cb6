package psych_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/psych-runtime/psych"
	"github.com/psych-runtime/psych/openai"
	"github.com/psych-runtime/psych/psychtest"
	"github.com/psych-runtime/psych/sandbox"
)

// twoBindings is a program calling two bindings with arguments made now,
// so that the program text alone cannot satisfy the test.
func twoBindings() (code string, want int) {
	a, b := time.Now().Nanosecond()%997, time.Now().Second()+3
	return fmt.Sprintf("s = add(%d, %d)\necho(n=s)['n'] * 2", a, b), (a + b) * 2
}

func resultOf(t *testing.T, msg psych.Message) sandbox.Result {
	t.Helper()
	var res sandbox.Result
	if err := json.Unmarshal([]byte(msg.Content), &res); err != nil {
		t.Fatalf("tool message %q: %v", msg.Content, err)
	}
	return res
}

func TestTurnScripted(t *testing.T) {
	ts := newTools(t)
	code, want := twoBindings()
	args, _ := json.Marshal(map[string]string{"code": code})
	model := &psychtest.Scripted{Steps: []func([]psych.Message) psych.Message{
		func([]psych.Message) psych.Message {
			return psych.Message{Role: psych.RoleAssistant, ToolCalls: []psych.ToolCall{{ID: "c1", Name: psych.RunCode, Args: args}}}
		},
		func(tr []psych.Message) psych.Message {
			res := resultOf(t, tr[len(tr)-1])
			return psych.Message{Role: psych.RoleAssistant, Content: "the answer is " + string(res.Value)}
		},
	}}
	store := psych.NewMemoryStore()
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t), Model: model, Store: store})
	tr, err := r.Turn(context.Background(), []psych.Message{{Role: psych.RoleUser, Content: "add them"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 4 || tr[2].Role != psych.RoleTool || tr[2].ToolCallID != "c1" || tr[3].Content != fmt.Sprintf("the answer is %d", want) {
		t.Fatalf("transcript %+v", tr)
	}
	execs, _ := store.Executions(context.Background())
	if len(execs) != 1 || execs[0].CallID != "c1" {
		t.Fatalf("executions %+v", execs)
	}
	calls, _ := store.Calls(context.Background(), execs[0].ID)
	if len(calls) != 2 || calls[0].Tool != "add" || calls[1].Tool != "echo" {
		t.Fatalf("binding calls %+v", calls)
	}
	if _, err := newRuntime(t, psych.Config{}).Turn(context.Background(), nil); !errors.Is(err, psych.ErrNoModel) {
		t.Fatalf("Turn without a model: %v", err)
	}
	loop := &psychtest.Scripted{}
	for range 3 {
		loop.Steps = append(loop.Steps, func([]psych.Message) psych.Message {
			return psych.Message{ToolCalls: []psych.ToolCall{{ID: "e", Name: "echo", Args: json.RawMessage(`{}`)}}}
		})
	}
	if _, err := newRuntime(t, psych.Config{Registry: ts.reg, Model: loop, MaxSteps: 2}).Turn(context.Background(), nil); !errors.Is(err, psych.ErrStepLimit) {
		t.Fatalf("a model that never answers: %v, want ErrStepLimit", err)
	}
}

// TestTurnOpenAI: the same turn through the OpenAI-compatible client,
// against a local fake server.
func TestTurnOpenAI(t *testing.T) {
	ts := newTools(t)
	code, want := twoBindings()
	step := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var in struct {
			Messages []map[string]any `json:"messages"`
			Tools    []struct {
				Function struct{ Name, Description string } `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		step++
		switch step {
		case 1:
			var desc string
			for _, tool := range in.Tools {
				if tool.Function.Name == psych.RunCode {
					desc = tool.Function.Description
				}
			}
			if !strings.Contains(desc, "add(a, b)") {
				http.Error(w, "run_code not offered with its bindings: "+desc, 400)
				return
			}
			args, _ := json.Marshal(map[string]string{"code": code})
			json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
				"role": "assistant", "content": nil,
				"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "run_code", "arguments": string(args)}}},
			}}}})
		default:
			last := in.Messages[len(in.Messages)-1]
			var res sandbox.Result
			json.Unmarshal([]byte(fmt.Sprint(last["content"])), &res)
			json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
				"role": "assistant", "content": "the answer is " + string(res.Value),
			}}}})
		}
	}))
	defer srv.Close()
	model, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "k", Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: newSandbox(t), Model: model})
	tr, err := r.Turn(context.Background(), []psych.Message{{Role: psych.RoleUser, Content: "add them"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr[len(tr)-1].Content; got != fmt.Sprintf("the answer is %d", want) || step != 2 {
		t.Fatalf("answer %q after %d steps", got, step)
	}
}

// TestReplay: a recorded run replays with no tool called; a changed program
// diverges at its first differing call.
func TestReplay(t *testing.T) {
	ts := newTools(t)
	store := psych.NewMemoryStore()
	sb := newSandbox(t)
	r := newRuntime(t, psych.Config{Registry: ts.reg, Sandbox: sb, Store: store})
	code, _ := twoBindings()
	_, res := runCode(t, r, code+"\n")
	if res.Failure != nil {
		t.Fatalf("%+v", res.Failure)
	}
	before := ts.handled.Load()
	rep, err := r.Replay(context.Background(), res.ID, psych.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Reproduced || rep.Divergence != nil || string(rep.Result.Value) != string(res.Value) || ts.handled.Load() != before {
		t.Fatalf("replay %+v (handlers ran %d times)", rep, ts.handled.Load()-before)
	}
	// The same program with the second call's argument changed.
	execs, _ := store.Executions(context.Background())
	rec := execs[len(execs)-1]
	calls, _ := store.Calls(context.Background(), rec.ID)
	changed := strings.Replace(rec.Code, "echo(n=s)", "echo(n=s+1)", 1)
	rec2 := rec
	rec2.ID, rec2.Code, rec2.Result = "changed-1", changed, nil
	if err := store.BeginExecution(context.Background(), &rec2); err != nil {
		t.Fatal(err)
	}
	if err := store.FinishExecution(context.Background(), rec2.ID, rec.Result); err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		c.Parent = rec2.ID
		if err := store.RecordCall(context.Background(), &c); err != nil {
			t.Fatal(err)
		}
	}
	rep, err = r.Replay(context.Background(), rec2.ID, psych.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Reproduced || rep.Divergence == nil || rep.Divergence.Index != 2 || ts.handled.Load() != before {
		t.Fatalf("changed program: %+v, divergence %+v", rep, rep.Divergence)
	}
	var want, got struct {
		Tool string
		Args map[string]int
	}
	json.Unmarshal(rep.Divergence.Want, &want)
	json.Unmarshal(rep.Divergence.Got, &got)
	if want.Tool != "echo" || got.Args["n"] != want.Args["n"]+1 {
		t.Fatalf("divergence want %s got %s", rep.Divergence.Want, rep.Divergence.Got)
	}
	if _, err := r.Replay(context.Background(), "no-such", psych.ReplayOptions{}); !errors.Is(err, psych.ErrNotFound) {
		t.Fatalf("replay of an unknown id: %v", err)
	}
}

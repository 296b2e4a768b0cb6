package psych

import (
	"context"
	"encoding/json"
	"fmt"
)

// Turn runs the loop model → tool calls → results → model until the model
// answers (a message without tool calls), at most Config.MaxSteps model
// steps. It returns the transcript with every new message appended; the
// answer is its last. Each tool call goes through Call, Via model. A
// tool's failure is reported to the model as the tool message's content,
// never as an error; the error is ErrNoModel, ErrStepLimit (with the
// transcript so far), the Model's own, or ctx's.
func (r *Runtime) Turn(ctx context.Context, transcript []Message) ([]Message, error) {
	if r.cfg.Model == nil {
		return transcript, fmt.Errorf("turn: %w", ErrNoModel)
	}
	for range r.cfg.MaxSteps {
		msg, err := r.cfg.Model.Next(ctx, transcript, r.Tools())
		if err != nil {
			return transcript, fmt.Errorf("turn: model: %w", err)
		}
		if msg.Role == "" {
			msg.Role = RoleAssistant
		}
		transcript = append(transcript, msg)
		if len(msg.ToolCalls) == 0 {
			return transcript, nil
		}
		for _, tc := range msg.ToolCalls {
			out, err := r.Call(ctx, Call{Tool: tc.Name, Args: tc.Args, ID: tc.ID, Via: ViaModel})
			if err != nil {
				return transcript, fmt.Errorf("turn: %w", err)
			}
			transcript = append(transcript, Message{Role: RoleTool, ToolCallID: out.CallID, Name: tc.Name, Content: toolContent(out)})
		}
	}
	return transcript, fmt.Errorf("turn: %w (%d)", ErrStepLimit, r.cfg.MaxSteps)
}

// toolContent is what the model reads of a call's outcome: the value's JSON,
// or {"error": …}.
func toolContent(out *Outcome) string {
	if out.Kind == OutcomeOK {
		return string(out.Value)
	}
	b, _ := json.Marshal(map[string]string{"error": out.Error, "outcome": out.Kind})
	return string(b)
}

package psych

import (
	"context"
	"encoding/json"
)

// Role is who wrote a Message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a transcript.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name are set on a RoleTool message: the call it
	// answers and the tool's name.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Model decides the next step: given the transcript and the tools offered,
// it returns an assistant message, which either calls tools or answers.
type Model interface {
	Next(ctx context.Context, transcript []Message, tools []Spec) (Message, error)
}

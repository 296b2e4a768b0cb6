package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/psych-runtime/psych"
)

// The request and response bodies, as far as this package reads or writes
// them.

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Tools       []chatTool    `json:"tools,omitempty"`
	ToolChoice  string        `json:"tool_choice,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is null only on an assistant message that calls tools and
	// says nothing.
	Content    *string        `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name string `json:"name"`
	// Arguments is a JSON string holding the arguments' JSON text. Some
	// servers answer with the object itself; both are read.
	Arguments json.RawMessage `json:"arguments"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function chatToolSpec `json:"function"`
}

type chatToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content   *string        `json:"content"`
			ToolCalls []chatToolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	// Error is set by servers that answer a failure with 2xx.
	Error json.RawMessage `json:"error"`
}

// emptyObject is the schema sent for a Spec without Parameters.
var emptyObject = json.RawMessage(`{"type":"object","properties":{}}`)

func buildRequest(cfg *Config, transcript []psych.Message, tools []psych.Spec) (*chatRequest, error) {
	req := &chatRequest{
		Model:       cfg.Model,
		Messages:    make([]chatMessage, 0, len(transcript)),
		Temperature: cfg.Temperature,
		MaxTokens:   cfg.MaxTokens,
	}
	for i, m := range transcript {
		cm, err := toChatMessage(m)
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", ErrBadTranscript, i, err)
		}
		req.Messages = append(req.Messages, cm)
	}
	for _, s := range tools {
		params := s.Parameters
		if len(bytes.TrimSpace(params)) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
			params = emptyObject
		} else if !json.Valid(params) {
			return nil, fmt.Errorf("%w: tool %q: parameters are not valid JSON", ErrBadTranscript, s.Name)
		}
		req.Tools = append(req.Tools, chatTool{
			Type:     "function",
			Function: chatToolSpec{Name: s.Name, Description: s.Description, Parameters: params},
		})
	}
	if len(req.Tools) > 0 {
		req.ToolChoice = "auto"
	}
	return req, nil
}

func toChatMessage(m psych.Message) (chatMessage, error) {
	content := m.Content
	cm := chatMessage{Role: string(m.Role), Content: &content}
	if len(m.ToolCalls) > 0 && m.Role != psych.RoleAssistant {
		return cm, fmt.Errorf("role %q carries tool calls", m.Role)
	}
	switch m.Role {
	case psych.RoleSystem, psych.RoleUser:
	case psych.RoleAssistant:
		if len(m.ToolCalls) > 0 && content == "" {
			cm.Content = nil
		}
		for _, tc := range m.ToolCalls {
			args, err := argumentsText(tc.Args)
			if err != nil {
				return cm, fmt.Errorf("tool call %q: %w", tc.ID, err)
			}
			text, _ := json.Marshal(args) // a string always encodes
			cm.ToolCalls = append(cm.ToolCalls, chatToolCall{
				ID:       tc.ID,
				Type:     "function",
				Function: chatFunction{Name: tc.Name, Arguments: text},
			})
		}
	case psych.RoleTool:
		if m.ToolCallID == "" {
			return cm, fmt.Errorf("tool message without a tool call id")
		}
		cm.ToolCallID = m.ToolCallID
	default:
		return cm, fmt.Errorf("unknown role %q", m.Role)
	}
	return cm, nil
}

// argumentsText is the arguments string sent for a call's Args: "{}" for
// none, the text itself for a JSON string (what fromArguments made of text
// that was not JSON, so the model sees what it wrote), else the compacted
// JSON.
func argumentsText(args json.RawMessage) (string, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		return "{}", nil
	}
	if args[0] == '"' {
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return "", fmt.Errorf("arguments are not valid JSON")
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return "", fmt.Errorf("arguments are not valid JSON")
	}
	return buf.String(), nil
}

// fromArguments turns a response's arguments into Args, which is always
// valid JSON: {} for none, the model's JSON when valid, else the raw text
// as a JSON string, which no object schema accepts.
func fromArguments(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return json.RawMessage("{}")
	}
	text := raw
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			// Unreachable once the whole body has decoded.
			return json.RawMessage("{}")
		}
		text = bytes.TrimSpace([]byte(s))
		if len(text) == 0 || bytes.Equal(text, []byte("null")) {
			return json.RawMessage("{}")
		}
		if !json.Valid(text) {
			quoted, _ := json.Marshal(s) // a string always encodes
			return quoted
		}
	}
	return append(json.RawMessage(nil), text...)
}

func fromChatResponse(r *chatResponse) (psych.Message, error) {
	msg := r.Choices[0].Message
	out := psych.Message{Role: psych.RoleAssistant}
	if msg.Content != nil {
		out.Content = *msg.Content
	}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return psych.Message{}, fmt.Errorf("%w: tool call %d has type %q, not function", ErrBadResponse, i, tc.Type)
		}
		out.ToolCalls = append(out.ToolCalls, psych.ToolCall{
			ID:   tc.ID,
			Name: tc.Function.Name,
			Args: fromArguments(tc.Function.Arguments),
		})
	}
	return out, nil
}

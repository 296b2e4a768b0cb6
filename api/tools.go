package api

import "github.com/psych-runtime/psych/sandbox"

// CheckTools holds a request's tool declarations to the API's caps
// (MaxTools, MaxSchemaBytes) and the binding rules (names, parameters), as
// psych serve and the embedded transport both do; nil when they pass. The
// schema itself is compiled where the tools are registered
// (Runtime.WithTools).
func CheckTools(tools []Tool) *Error {
	if len(tools) > MaxTools {
		return invalid("bindings: %d tools, at most %d", len(tools), MaxTools)
	}
	list := make([]sandbox.Binding, 0, len(tools))
	for _, t := range tools {
		if err := sandbox.CheckName(t.Name); err != nil {
			return invalid("bindings: %v", err)
		}
		if len(t.Parameters) > MaxSchemaBytes {
			return invalid("bindings: %s: a parameters schema of %d bytes, at most %d", t.Name, len(t.Parameters), MaxSchemaBytes)
		}
		list = append(list, sandbox.Binding{Name: t.Name, Params: t.Params})
	}
	if err := sandbox.ValidateBindings(list); err != nil {
		return invalid("bindings: %v", err)
	}
	return nil
}

// Package psych is the tool path of an agent runtime: the Registry of tools
// a model may call, the Runtime that calls them through one path (schema
// check, Policy, approval, egress, recording), and run_code, which runs a
// model-written program in a sandbox whose host bindings are the same tools
// reached the same way.
//
// Promises:
//   - One path. A direct call (Via model) and a binding call (Via run_code)
//     of a tool get the same schema check, the same Policy decision, the
//     same Approver and the same record; only Via and the parent execution
//     differ. The sandbox packages cannot import this one, so no binding
//     has a back door.
//   - A client's tools take the same path. Tools a client declares for one
//     request (WithTools) are checked, decided, approved and recorded as
//     Go tools are, marked Client and, as bindings, Via client; they never
//     shadow the operator's, and their asks go to the client's Approver,
//     never the operator's (nor the operator's to the client's).
//   - No sandbox, no run_code. A Runtime without a Sandbox does not offer
//     the tool.
//   - Approval suspends. A binding waiting for the Approver freezes its run
//     (sandbox.Suspend), so neither the program's CPU nor its wall budget
//     is spent while a person decides.
//   - Tools reach the network only through the egress seam in their
//     context (EgressFrom); the default denies everything.
//   - Failures are data: a bad argument, a denial and a handler's error come
//     back as an Outcome, a program's failure as its Result.
//   - One form of the arguments. What passed the schema is what the Policy,
//     the Approver, the handler and the record get: one canonical text.
//     Keys encoding/json would merge (a duplicate, or keys equal under its
//     case folding) are refused, as are arguments past Spec.MaxArgsBytes,
//     MaxArgsDepth or MaxArgsElements, before they are decoded.
//   - Bounded records. What a call, and all the calls of one run, can make
//     the Store hold is capped (Config.RecordArgsBytes, RecordValueBytes,
//     RecordRunBytes); past the caps a record keeps head, size and sha256.
//   - A replay runs under the operator's limits, not the ledger's.
package psych

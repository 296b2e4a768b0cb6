// Package openai is a psych.Model that asks an OpenAI-compatible Chat
// Completions API (POST {BaseURL}/chat/completions) for the next step,
// tool calls included.
//
// Promises:
//   - The API key goes only into the Authorization header. It is never
//     logged and never put into an error; an error body that echoes it has
//     it redacted.
//   - Every answer is bounded: the body read stops at
//     Config.MaxResponseBytes (ErrBadResponse past it), an error body is
//     cut to a 1 KiB excerpt, and a Next call ends at Config.Timeout or
//     when its context ends, whichever is first.
//   - A transport or server failure is a Go error (ErrHTTPStatus,
//     ErrBadResponse, the context's error). A model's mistake is not: tool
//     call arguments that are not valid JSON come back as data (see
//     Client.Next), for the Runtime's schema check to report to the model.
//   - Nothing is sent that the mapping cannot represent faithfully: an
//     unknown role or malformed JSON in the transcript is ErrBadTranscript,
//     before any request.
//   - Without Config.HTTPClient, redirects are not followed; a 3xx is
//     ErrHTTPStatus.
package openai

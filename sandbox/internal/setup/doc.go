// Package setup is what the two backends share outside the host core:
// the one way each undoes a partial setup, and the configuration defaults
// and checks their Configs have in common.
//
//   - undo.go: Undo, the stack of what a setup acquired, undone newest
//     first (a phase pushes its own undo as it acquires; a failed setup, or
//     the run's removal, unwinds them all).
//   - config.go: Common, the fields both Configs share, their defaults and
//     their checks (each a small named function, runc configs/validate's
//     style).
package setup

// Package cli holds the end-to-end tests of psych's command line: they
// build psych and psych-full as make build does (statically linked, side
// by side) and run them as a user would, checking their output and exit
// codes. Unit tests of a command stay beside its package in
// cmd/internal/commands.
package cli

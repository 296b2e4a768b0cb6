//go:build cgo

package subprocess

const cgoEnabled = true

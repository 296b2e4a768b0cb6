//go:build !race

package soak

// raceBuild: the race detector is on.
const raceBuild = false

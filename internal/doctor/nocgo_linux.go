//go:build linux && !cgo

package doctor

func probeUserns(uint32, uint32) (bool, error) { return false, errNoCgo }

func checkSeccomp() Check {
	return Check{Name: "seccomp", Status: Fail, Found: errNoCgo.Error(), Fix: cgoFix}
}

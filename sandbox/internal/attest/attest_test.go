//go:build linux

package attest

import (
	"maps"
	"testing"
)

func TestParseLimitsAndRootMount(t *testing.T) {
	limits := `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              10                   11                   seconds
Max file size             10485760             10485760             bytes
Max stack size            8388608              8388608              bytes
Max core file size        0                    0                    bytes
Max processes             66                   66                   processes
Max open files            256                  256                  files
Max address space         unlimited            unlimited            bytes
`
	got := parseLimits([]byte(limits))
	want := map[string]string{"cpu": "10 11", "fsize": "10485760 10485760", "stack": "8388608 8388608", "core": "0 0", "nproc": "66 66", "nofile": "256 256", "as": "unlimited unlimited"}
	if !maps.Equal(got, want) {
		t.Fatalf("limits %v, want %v", got, want)
	}
	mi := `25 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
301 25 0:60 / /tmp rw - tmpfs tmpfs rw
402 25 0:70 / / rw - tmpfs tmpfs rw,size=1024k
`
	if got := parseRootMount([]byte(mi)); got != "402:tmpfs" {
		t.Fatalf("root mount %q, want the top mount on /", got)
	}
	if got := parseRootMount([]byte("garbage\n")); got != "" {
		t.Fatalf("root mount of garbage: %q", got)
	}
}

package doctor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

func TestDoctorFailed(t *testing.T) {
	r := Report{Checks: []Check{{Name: "a", Status: OK}, {Name: "b", Status: Warn}}}
	if r.Failed() {
		t.Fatal("OK and WARN only: Failed")
	}
	r.Checks = append(r.Checks, Check{Name: "c", Status: Fail})
	if !r.Failed() {
		t.Fatal("a FAIL: not Failed")
	}
}

func TestDoctorWriteText(t *testing.T) {
	r := Report{Checks: []Check{
		{Name: "kernel", Status: OK, Found: "Linux 6.18"},
		{Name: "userns", Status: Fail, Found: "denied:\nby AppArmor", Fix: "load this profile:\nprofile psych /x {\n}"},
	}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "OK    kernel  Linux 6.18\n" +
		"FAIL  userns  denied: by AppArmor — load this profile:\n" +
		"        profile psych /x {\n" +
		"        }\n" +
		"\nattestation: none (the isolated execution did not run)\n"
	if b.String() != want {
		t.Fatalf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	r.Attestation = &sandbox.Isolation{Backend: "subprocess", Mode: "namespaces", Namespaces: []string{"user", "net"},
		Network: &sandbox.NetworkCheck{Verified: true, Links: []string{"lo"}}, Cgroup: "v1"}
	b.Reset()
	r.WriteText(&b)
	for _, s := range []string{"attestation of the isolated execution (subprocess backend):", "namespaces   user net", "network      verified=true, links lo", "cgroup       v1"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, b.String())
		}
	}
}

func TestDoctorJSONShape(t *testing.T) {
	b, err := json.Marshal(Report{Checks: []Check{{Name: "kernel", Status: OK, Found: "Linux"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"checks":[{"name":"kernel","status":"OK","found":"Linux","fix":""}],"attestation":null}`
	if string(b) != want {
		t.Fatalf("JSON %s, want %s", b, want)
	}
}

package resources

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func etcFile(t *testing.T, path string) string {
	t.Helper()
	for _, f := range EtcFiles() {
		if f.Path == path {
			return f.Content
		}
	}
	t.Fatalf("EtcFiles has no %s", path)
	return ""
}

// TestEtcFilesIdentity: root, the sandbox user and nobody, each once, in
// files shaped as glibc's files module reads them.
func TestEtcFilesIdentity(t *testing.T) {
	for _, tc := range []struct {
		path   string
		fields int
		want   []string
	}{
		{"/etc/passwd", 7, []string{"root:x:0:0:", "sandbox:x:1000:1000:", "nobody:x:65534:65534:"}},
		{"/etc/group", 4, []string{"root:x:0:", "sandbox:x:1000:", "nogroup:x:65534:"}},
	} {
		lines := strings.Split(strings.TrimSuffix(etcFile(t, tc.path), "\n"), "\n")
		if len(lines) != len(tc.want) {
			t.Errorf("%s: %d entries, want %d: %q", tc.path, len(lines), len(tc.want), lines)
		}
		for i, l := range lines {
			if n := len(strings.Split(l, ":")); n != tc.fields {
				t.Errorf("%s line %q: %d fields, want %d", tc.path, l, n, tc.fields)
			}
			if i < len(tc.want) && !strings.HasPrefix(l, tc.want[i]) {
				t.Errorf("%s line %d %q, want it to start %q", tc.path, i, l, tc.want[i])
			}
		}
	}
	ns := etcFile(t, "/etc/nsswitch.conf")
	for _, db := range []string{"passwd", "group", "hosts", "services", "protocols"} {
		if !strings.Contains(ns, db+": files\n") {
			t.Errorf("nsswitch.conf does not read %s from files:\n%s", db, ns)
		}
	}
}

// TestHostEtc: only public files under /etc, never the private keys beside
// the certificates, and nothing EtcFiles builds.
func TestHostEtc(t *testing.T) {
	for _, p := range HostEtc() {
		if filepath.Clean(p) != p || !strings.HasPrefix(p, "/etc/") {
			t.Errorf("%q: want a clean path under /etc", p)
		}
		if strings.HasPrefix(p, "/etc/ssl/private") || p == "/etc/ssl" || strings.Contains(p, "shadow") {
			t.Errorf("%q exposes secrets", p)
		}
		if slices.ContainsFunc(EtcFiles(), func(f EtcFile) bool { return f.Path == p }) {
			t.Errorf("%q is both built and bound", p)
		}
	}
}

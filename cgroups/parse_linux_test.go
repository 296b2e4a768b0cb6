package cgroups

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// Mountinfo as three kinds of host print it.
const (
	hybridMountinfo = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	unifiedMountinfo = `22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw
27 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
90 22 0:26 /system.slice /mnt/with\040space rw,relatime shared:4 - cgroup2 cgroup2 rw
`
	legacyMountinfo = `31 23 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
32 31 0:29 / /sys/fs/cgroup/systemd rw shared:9 - cgroup cgroup rw,xattr,release_agent=/lib/systemd/systemd-cgroups-agent,name=systemd
33 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw shared:10 - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 /docker/abc /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory
35 31 0:32 / /sys/fs/cgroup/pids rw shared:12 - cgroup cgroup rw,pids
`
)

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		layout     Layout
		unified    string   // mount point, "" for none
		v1         []string // mount points of controller hierarchies
	}{
		{"hybrid", hybridMountinfo, LayoutHybrid, "/sys/fs/cgroup/unified",
			[]string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/freezer", "/sys/fs/cgroup/pids"}},
		{"unified", unifiedMountinfo, LayoutUnified, "/sys/fs/cgroup", nil},
		{"legacy", legacyMountinfo, LayoutLegacy, "",
			[]string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids"}},
		{"none", "22 1 259:1 / / rw - ext4 /dev/root rw\n", LayoutNone, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := parseMountinfo(strings.NewReader(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := ms.layout(); got != tc.layout {
				t.Errorf("layout %q, want %q", got, tc.layout)
			}
			got := ""
			if ms.unified != nil {
				got = ms.unified.point
			}
			if got != tc.unified {
				t.Errorf("unified mount %q, want %q", got, tc.unified)
			}
			var v1 []string
			for _, mp := range ms.v1 {
				v1 = append(v1, mp.point)
			}
			if !slices.Equal(v1, tc.v1) {
				t.Errorf("v1 mounts %q, want %q", v1, tc.v1)
			}
		})
	}
}

func TestMountDirs(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(legacyMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if mp := ms.v1For("cpuacct"); mp == nil || mp != ms.v1For("cpu") || mp.point != "/sys/fs/cgroup/cpu,cpuacct" {
		t.Fatalf("cpu and cpuacct should share one co-mounted hierarchy, got %+v", mp)
	}
	if ms.v1For("freezer") != nil {
		t.Error("freezer is not mounted in the fixture")
	}
	mem := ms.v1For("memory")
	for _, tc := range []struct{ cg, dir, err string }{
		{"/docker/abc", "/sys/fs/cgroup/memory", ""},
		{"/docker/abc/x", "/sys/fs/cgroup/memory/x", ""},
		{"/docker/abcd", "", "outside the mount"},
		{"/other", "", "outside the mount"},
		{"/docker/abc/../../x", "", "outside this cgroup namespace"},
	} {
		dir, err := mem.dir(tc.cg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("dir(%q) = %q, %v; want an error with %q", tc.cg, dir, err, tc.err)
			}
			continue
		}
		if err != nil || dir != tc.dir {
			t.Errorf("dir(%q) = %q, %v; want %q", tc.cg, dir, err, tc.dir)
		}
	}

	us, err := parseMountinfo(strings.NewReader(unifiedMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if dir, err := us.unified.dir("/"); err != nil || dir != "/sys/fs/cgroup" {
		t.Errorf("root cgroup dir %q, %v", dir, err)
	}
	// A mount point with a space in it, escaped by the kernel.
	sp, err := parseMountinfo(strings.NewReader(`90 22 0:26 /system.slice /mnt/with\040space rw,relatime shared:4 - cgroup2 cgroup2 rw` + "\n"))
	if err != nil || sp.unified == nil || sp.unified.point != "/mnt/with space" || sp.unified.root != "/system.slice" {
		t.Errorf("escaped mount point: %+v, %v", sp.unified, err)
	}
}

func TestParseProcCgroup(t *testing.T) {
	pc, err := parseProcCgroup(strings.NewReader("9:name=systemd:/\n4:memory:/process_api/0a6e\n2:cpu,cpuacct:/a:b\n0::/user.slice/x.scope\n"))
	if err != nil {
		t.Fatal(err)
	}
	if pc.unified != "/user.slice/x.scope" || pc.v1["memory"] != "/process_api/0a6e" || pc.v1["cpuacct"] != "/a:b" || pc.v1["cpu"] != "/a:b" {
		t.Errorf("parsed %+v", pc)
	}
}

func TestParseRunName(t *testing.T) {
	for name, want := range map[string]bool{
		"123.456-r1":      true,
		"123.456-a.b_c-d": true,
		"123.456-":        false,
		"123.456":         false,
		"123-r1":          false,
		"x.456-r1":        false,
		"0.456-r1":        false,
		"0123.456-r1":     false,
		"123.-5-r1":       false,
		"host":            false,
		"psych":           false,
		"123.456-r/1":     false,
	} {
		if _, ok := parseRunName(name); ok != want {
			t.Errorf("parseRunName(%q) ok=%v, want %v", name, ok, want)
		}
	}
	o, _ := parseRunName("77.8899-x")
	if o != (Owner{77, 8899}) || o.String() != "77.8899" {
		t.Errorf("owner %+v", o)
	}
}

func TestKeyed(t *testing.T) {
	b := []byte("usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n")
	for key, want := range map[string]int64{"usage_usec": 1234, "system_usec": 234} {
		if n, ok := keyed(b, key); !ok || n != want {
			t.Errorf("keyed %s = %d, %v", key, n, ok)
		}
	}
	if _, ok := keyed(b, "usage"); ok {
		t.Error("a key prefix must not match")
	}
	if n, ok := keyed([]byte("max 3"), "max"); !ok || n != 3 {
		t.Errorf("last line without newline: %d %v", n, ok)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{UnifiedParent: "relative/psych"},
		{UnifiedParent: "/sys/fs/cgroup/a/../b"},
		{UnifiedParent: "/"},
		{V1Parents: map[string]string{"cpuset": "/sys/fs/cgroup/cpuset/psych"}},
		{V1Parents: map[string]string{Memory: "memory/psych"}},
	} {
		if err := c.validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", c, err)
		}
	}
	if err := (&Config{V1Parents: map[string]string{Memory: "/sys/fs/cgroup/memory/x"}}).validate(); err != nil {
		t.Error(err)
	}
	for _, id := range []string{"", "a/b", "a b", strings.Repeat("x", 65), "ü"} {
		if err := validRunID(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("run id %q: got %v, want ErrInvalid", id, err)
		}
	}
	if err := (Limits{Pids: -1}).validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative pids: %v", err)
	}
}

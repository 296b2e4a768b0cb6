package host

import "fmt"

// The sandbox's identity, the same in every backend: the program runs as
// uid/gid SandboxUID ("sandbox") wherever a user namespace maps it, with
// HOME, TMPDIR and the working directory Home, on a host named Hostname.
const (
	SandboxUID = 1000
	SandboxGID = 1000
	Home       = "/tmp"
	Hostname   = "sandbox"
	NobodyID   = 65534
)

// EtcFile is one file of the sandbox's /etc, built from nothing.
type EtcFile struct {
	Path, Content string
}

// EtcFiles are the files every backend's /etc gets: passwd and group with
// the sandbox user and nobody, hosts with localhost and Hostname, and an
// nsswitch.conf that reads only them.
func EtcFiles() []EtcFile {
	return []EtcFile{
		{"/etc/passwd", fmt.Sprintf("sandbox:x:%d:%d:psych sandbox:%s:/usr/sbin/nologin\nnobody:x:%d:%d:nobody:/nonexistent:/usr/sbin/nologin\n", SandboxUID, SandboxGID, Home, NobodyID, NobodyID)},
		{"/etc/group", fmt.Sprintf("sandbox:x:%d:\nnogroup:x:%d:\n", SandboxGID, NobodyID)},
		{"/etc/hosts", "127.0.0.1\tlocalhost " + Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
		{"/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n"},
	}
}

package resources

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
// root, the sandbox user and nobody, hosts with localhost and Hostname, and
// an nsswitch.conf that reads only files.
//
// root (uid and gid 0) is listed so that what looks up uid 0 by name or
// number works as on any Linux system: pwd.getpwuid(0), tarfile's and
// shutil.make_archive's owner='root', CPython's own tests. A name grants
// nothing. The program never runs as 0: inside a user namespace 0 is not
// mapped at all (or, under an engine's, is the container's setup id below
// the run's), and without one the run uid is never 0; every backend runs it
// with no capabilities.
func EtcFiles() []EtcFile { return EtcFilesFor(SandboxUID, SandboxGID) }

// EtcFilesFor is EtcFiles with the sandbox user at uid/gid: where no user
// namespace maps the program to SandboxUID (an engine without one), its
// own outside ids, so that the program finds itself in /etc/passwd.
func EtcFilesFor(uid, gid uint32) []EtcFile {
	return []EtcFile{
		{"/etc/passwd", fmt.Sprintf("root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%d:%d:psych sandbox:%s:/usr/sbin/nologin\nnobody:x:%d:%d:nobody:/nonexistent:/usr/sbin/nologin\n", uid, gid, Home, NobodyID, NobodyID)},
		{"/etc/group", fmt.Sprintf("root:x:0:\nsandbox:x:%d:\nnogroup:x:%d:\n", gid, NobodyID)},
		{"/etc/hosts", "127.0.0.1\tlocalhost " + Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
		{"/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\nservices: files\nprotocols: files\n"},
	}
}

// HostEtc are the host's /etc entries that a root built from nothing (the
// subprocess backend's view) binds read-only at the same path, each where
// the host has it: the network databases netbase installs (services and
// protocols: getservbyname, getaddrinfo with a named port), OpenSSL's
// configuration, and the trust store ca-certificates installs (the bundle
// ca-certificates.crt and the hashed links, which point into
// /usr/share/ca-certificates, bound with /usr), and Debian's alternatives
// (/etc/alternatives: only symlinks, through which libraries such as BLAS
// and LAPACK are reached from /usr). Nothing here is secret:
// /etc/ssl/private is never bound. A container image keeps its own.
func HostEtc() []string {
	return []string{"/etc/services", "/etc/protocols", "/etc/ssl/openssl.cnf", "/etc/ssl/certs", "/etc/alternatives"}
}

package contract

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/psych-runtime/psych/sandbox"
)

// The cases of what ordinary programs expect of a Linux system, found by
// running CPython's own test suite in the sandbox: a root entry in the
// user and group databases, the network databases, a trust store,
// pseudo-terminals, and EPERM for an id the program may not take. Each
// holds on every backend, and none of them grants the program anything.

func (s *suite) rootEntries(t *testing.T) {
	code := `import errno, grp, os, pwd, shutil, tarfile
out = {'pw': list(pwd.getpwuid(0))[:4], 'pwnam': pwd.getpwnam('root').pw_uid,
       'gr': [grp.getgrgid(0).gr_name, grp.getgrnam('root').gr_gid]}
d = os.environ['TMPDIR']
src = os.path.join(d, 'tree')
os.mkdir(src)
open(os.path.join(src, 'f'), 'w').write('x')
arc = shutil.make_archive(os.path.join(d, 'a'), 'gztar', root_dir=src, owner='root', group='root')
with tarfile.open(arc) as t:
    out['members'] = sorted([m.name, m.uid, m.gid, m.uname, m.gname] for m in t.getmembers())
out['ids'] = [os.getuid(), os.geteuid(), os.getgid(), os.getegid()]
out['name'] = pwd.getpwuid(os.getuid()).pw_name
p = os.path.join(d, 'read-only')
open(p, 'w').close()
os.chmod(p, 0o444)
try:
    open(p, 'w'); out['write'] = 'written'
except OSError as e:
    out['write'] = errno.errorcode.get(e.errno, str(e.errno))
try:
    os.chown(p, 0, 0); out['chown'] = 'done'
except OSError as e:
    out['chown'] = errno.errorcode.get(e.errno, str(e.errno))
out`
	var got struct {
		PW      []any   `json:"pw"`
		PWNam   float64 `json:"pwnam"`
		GR      []any   `json:"gr"`
		Members [][]any `json:"members"`
		IDs     []float64
		Name    string
		Write   string
		Chown   string
	}
	s.value(t, code, &got)
	if !reflect.DeepEqual(got.PW, []any{"root", "x", 0.0, 0.0}) || got.PWNam != 0 || !reflect.DeepEqual(got.GR, []any{"root", 0.0}) {
		t.Errorf("root: passwd %v (getpwnam uid %v), group %v; want root:x:0:0 and root:0", got.PW, got.PWNam, got.GR)
	}
	if len(got.Members) < 2 {
		t.Errorf("make_archive(owner='root') archived %v", got.Members)
	}
	for _, m := range got.Members {
		if !reflect.DeepEqual(m[1:], []any{0.0, 0.0, "root", "root"}) {
			t.Errorf("make_archive(owner='root', group='root'): member %v, want uid, gid 0 named root", m)
		}
	}
	// The entry names uid 0; the program still is not it, nor can it do
	// what only 0 could: write through a mode that forbids it, give a file
	// away.
	for _, id := range got.IDs {
		if id == 0 {
			t.Errorf("the program runs with an id 0: %v", got.IDs)
		}
	}
	if got.Name == "root" || !s.b.HostUIDs && s.b.NoIsolation == "" && (got.Name != "sandbox" || got.IDs[0] != 1000) {
		t.Errorf("the program is %q (uid %v); want the sandbox user, uid 1000, under a user namespace, never root", got.Name, got.IDs)
	}
	if got.Write != "EACCES" || got.Chown == "done" {
		t.Errorf("write through mode 0444: %s; chown to 0: %s; want EACCES and a refusal", got.Write, got.Chown)
	}
}

func (s *suite) networkDatabases(t *testing.T) {
	code := `import asyncio, socket
out = {'http': socket.getservbyname('http', 'tcp'), '443': socket.getservbyport(443, 'tcp'),
       'udp': socket.getprotobyname('udp'),
       'gai': sorted({a[4][1] for a in socket.getaddrinfo('localhost', 'http', type=socket.SOCK_STREAM)})}
async def main():
    async def echo(r, w):
        w.write((await r.readline()).upper())
        await w.drain()
        w.close()
    srv = await asyncio.start_server(echo, '127.0.0.1', 'postgresql')
    out['listening'] = srv.sockets[0].getsockname()[1]
    r, w = await asyncio.open_connection('localhost', 'postgresql')
    w.write(b'named\n')
    await w.drain()
    out['echo'] = (await r.readline()).decode()
    w.close()
    srv.close()
    await srv.wait_closed()
    ais = await asyncio.get_running_loop().getaddrinfo('localhost', 'https', type=socket.SOCK_STREAM)
    out['loop'] = sorted({a[4][1] for a in ais})
asyncio.run(main())
out`
	var got map[string]any
	s.value(t, code, &got)
	want := map[string]any{"http": 80.0, "443": "https", "udp": 17.0, "gai": []any{80.0},
		"listening": 5432.0, "echo": "NAMED\n", "loop": []any{443.0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("services and protocols: got %v, want %v", got, want)
	}
}

func (s *suite) trustStore(t *testing.T) {
	code := `import errno, os, ssl
stats = ssl.create_default_context().cert_store_stats()
try:
    open('/etc/ssl/certs/psych-probe.pem', 'w').write('x'); w = 'written'
except OSError as e:
    w = errno.errorcode.get(e.errno, str(e.errno))
try:
    private = sorted(os.listdir('/etc/ssl/private'))
except OSError as e:
    private = errno.errorcode.get(e.errno, str(e.errno))
[stats['x509_ca'], w, private]`
	var got [3]json.RawMessage
	s.value(t, code, &got)
	var cas float64
	var write string
	json.Unmarshal(got[0], &cas)
	json.Unmarshal(got[1], &write)
	if cas == 0 {
		t.Errorf("ssl.create_default_context() loaded no CA certificate: verified HTTPS would fail")
	}
	if write == "written" {
		t.Errorf("the trust store is writable: a program could add its own CA")
	}
	// The certificates are public; the keys beside them never are. A root
	// built from nothing has no /etc/ssl/private; an image's own is closed.
	var private []string
	if json.Unmarshal(got[2], &private) == nil && (len(private) > 0 || !s.b.ImageRoot && s.b.NoIsolation == "") {
		t.Errorf("/etc/ssl/private is there (%v): want ENOENT, or EACCES in an image", private)
	}
}

func (s *suite) pseudoTerminals(t *testing.T) {
	code := `import os, pty, sys, termios, tty
m, sl = os.openpty()
tty.setraw(sl)
os.write(m, b'to-slave')
a = os.read(sl, 100)
os.write(sl, b'to-master')
b = os.read(m, 100)
name = os.ttyname(sl)
listing = sorted(os.listdir('/dev/pts'))
pid, fd = pty.fork()
if pid == 0:
    os.write(1, ('%s %s %d' % (os.isatty(0), os.ttyname(0), len(termios.tcgetattr(0)))).encode())
    os._exit(7)
child = b''
while True:
    try:
        d = os.read(fd, 1000)
    except OSError:
        break
    if not d:
        break
    child += d
_, status = os.waitpid(pid, 0)
sys.stdout.flush()
spawned = pty.spawn([sys.executable, '-c', 'import os; os.write(1, b"spawned-%s" % str(os.isatty(1)).encode())'])
[a.decode(), b.decode(), name, listing, child.decode(), os.waitstatus_to_exitcode(status), spawned]`
	res := s.run(t, code, sandbox.Limits{}, nil)
	wantSuccess(t, res)
	var got []any
	if err := json.Unmarshal(res.Value, &got); err != nil || len(got) != 7 {
		t.Fatalf("value %s: %v", res.Value, err)
	}
	if got[0] != "to-slave" || got[1] != "to-master" {
		t.Errorf("the pty pair passed %q and %q, want to-slave and to-master", got[0], got[1])
	}
	name, _ := got[2].(string)
	if !strings.HasPrefix(name, "/dev/pts/") {
		t.Errorf("ttyname %q, want /dev/pts/N", name)
	}
	// A devpts instance of the run's own: its ptmx and the one pair it
	// holds, never a host terminal. Without isolation it is the host's.
	if s.b.NoIsolation == "" && !reflect.DeepEqual(got[3], []any{"0", "ptmx"}) {
		t.Errorf("/dev/pts lists %v with one pty open, want [0 ptmx]: only the run's own", got[3])
	}
	if c, _ := got[4].(string); !strings.HasPrefix(c, "True /dev/pts/") || got[5] != 7.0 {
		t.Errorf("pty.fork child reported %q and exit %v; want a controlling terminal at /dev/pts/N, exit 7", got[4], got[5])
	}
	if got[6] != 0.0 || !strings.Contains(res.Stdout, "spawned-True") {
		t.Errorf("pty.spawn returned %v with stdout %q, want 0 and the child's output through its terminal", got[6], res.Stdout)
	}
}

func (s *suite) setIDRefused(t *testing.T) {
	code := `import errno, os
def attempt(f):
    try:
        f()
        return 'ok'
    except OSError as e:
        return '%s:%s' % (type(e).__name__, errno.errorcode.get(e.errno, e.errno))
uid, gid = os.getuid(), os.getgid()
import tempfile
path = tempfile.mkstemp()[1]
refused = {n: attempt(f) for n, f in [
    ('setuid(0)', lambda: os.setuid(0)), ('setgid(0)', lambda: os.setgid(0)),
    ('setgroups([0])', lambda: os.setgroups([0])), ('seteuid(0)', lambda: os.seteuid(0)),
    ('setreuid(-1, 0)', lambda: os.setreuid(-1, 0)), ('setresuid(-1, -1, 0)', lambda: os.setresuid(-1, -1, 0)),
    ('setregid(0, -1)', lambda: os.setregid(0, -1)), ('setresgid(0, -1, -1)', lambda: os.setresgid(0, -1, -1)),
    ('setuid(4242)', lambda: os.setuid(4242)), ('setgid(4242)', lambda: os.setgid(4242)),
    ('chown(path, 4242, -1)', lambda: os.chown(path, 4242, -1))]}
own = {n: attempt(f) for n, f in [
    ('setuid(own)', lambda: os.setuid(uid)), ('setgid(own)', lambda: os.setgid(gid)),
    ('setreuid(own, own)', lambda: os.setreuid(uid, uid)), ('setresuid(-1, -1, -1)', lambda: os.setresuid(-1, -1, -1)),
    ('setresgid(own, -1, own)', lambda: os.setresgid(gid, -1, gid)),
    ('chown(path, own, own)', lambda: os.chown(path, uid, gid))]}
[refused, own, [uid, gid], list(os.getresuid()) + list(os.getresgid())]`
	var got []json.RawMessage
	s.value(t, code, &got)
	var refused, own map[string]string
	var before [2]float64
	var after []float64
	json.Unmarshal(got[0], &refused)
	json.Unmarshal(got[1], &own)
	json.Unmarshal(got[2], &before)
	json.Unmarshal(got[3], &after)
	if len(refused) != 11 || len(own) != 6 {
		t.Fatalf("probe incomplete: %s", got)
	}
	for call, r := range refused {
		if r != "PermissionError:EPERM" {
			t.Errorf("%s: %s, want PermissionError (EPERM)", call, r)
		}
	}
	for call, r := range own {
		if r != "ok" {
			t.Errorf("%s, a no-op: %s, want success", call, r)
		}
	}
	if !reflect.DeepEqual(after, []float64{before[0], before[0], before[0], before[1], before[1], before[1]}) || before[0] == 0 || before[1] == 0 {
		t.Errorf("ids after the attempts %v, want all still %v", after, before)
	}
}

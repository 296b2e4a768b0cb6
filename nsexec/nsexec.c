//go:build linux && cgo

// The in-namespace init of psych's subprocess backend.
//
// A constructor that runs before the Go runtime. Without the marker variable
// it returns at once. With it, this process carries out the plan the host
// computed (internal/reexec documents the plan and the sync messages; this
// file only decodes and executes them) and never returns to Go.
//
// Process tree: the host's fork server (this binary, started once with the
// forkserver marker) clones P, or where there is none the host starts this
// binary as P through Go's cheap vfork path. P drops to the outer run ids,
// unshares the user namespace, maps its own ids into it, unshares mount,
// net, ipc, uts, cgroup and pid, then clones the init (C)
// with CLONE_PARENT, so that C is the host's child and pid 1 of the new pid
// namespace. P reports C's pid and exits. C hands
// the host a NETLINK_ROUTE socket from its network namespace, waits for the
// go-ahead, builds the root, drops everything and forks the interpreter (I).
// C stays as pid 1: it reaps, reports I's exit, and exits with it, which
// kills whatever else is left in the namespace.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "nsexec.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

struct attr {
	uint64_t set, clr, propagation, userns_fd;
};

struct mnt {
	uint16_t kind, flags;
	int32_t fd;
	uint64_t attr;
	uint32_t mode;
	char *source, *target, *data;
	uint32_t datalen;
};

struct rlim {
	uint32_t resource;
	uint64_t soft, hard;
};

// llpath is one LANDLOCK_PATH record.
struct llpath {
	uint64_t access;
	char *path;
};

struct plan {
	uint32_t outer_uid, outer_gid, inner_uid, inner_gid;
	uint64_t flags;
	char *hostname, *root, *rootdata, *cwd, *exe;
	struct mnt *mnts;
	size_t nmnt;
	struct rlim *rlims;
	size_t nrlim;
	char *seccomp;
	size_t seccomplen;
	uint64_t landlock, landlock_fs;
	int rootns; // run() made the namespaces as root, without a user namespace
	struct llpath *llpaths;
	size_t nllpath;
	int32_t cgtasks[PSYCH_PLAN_MAX_CGROUPS];
	size_t ncgtasks;
	char **argv, **envp;
	size_t nargv, nenvp;
};

static int step;
// container is set in "container" mode: the init is pid 1 of a container an
// engine made, and its interpreter connects its own channel.
static int container;

// send_with_fd sends one message of len bytes on fd 3 (the sync socket, or
// the fork server's), with fd as SCM_RIGHTS unless it is -1.
static void send_with_fd(const void *buf, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(cbuf, 0, sizeof cbuf);
		h.msg_control = cbuf;
		h.msg_controllen = sizeof cbuf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	while (sendmsg(PSYCH_FD_SYNC, &h, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static void sendmsg_fd(uint32_t type, int32_t a, int32_t b, const char *text, int fd)
{
	struct psych_sync m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.a = a;
	m.b = b;
	if (text)
		strncpy(m.text, text, sizeof m.text - 1);
	send_with_fd(&m, sizeof m, fd);
}

static void say(uint32_t type, int32_t a) { sendmsg_fd(type, a, 0, NULL, -1); }

// fail reports the failed step with errno and a message, then exits.
__attribute__((noreturn, format(printf, 2, 3))) static void fail(int err, const char *fmt, ...)
{
	char text[sizeof(((struct psych_sync *)0)->text)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	sendmsg_fd(PSYCH_SYNC_ERROR, step, err, text, -1);
	_exit(PSYCH_EXIT_SETUP);
}

// await reads one message of the wanted type; EOF (the host is gone) or any
// other message ends this process.
static void await(uint32_t want)
{
	struct psych_sync m;
	ssize_t n;
	do
		n = recv(PSYCH_FD_SYNC, &m, sizeof m, 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof m || m.type != want)
		_exit(PSYCH_EXIT_SETUP);
}

// ---- plan decoding (format: internal/reexec/plan.go) ----

struct rd {
	const unsigned char *p, *end;
};

static int take(struct rd *r, void *dst, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return -1;
	memcpy(dst, r->p, n);
	r->p += n;
	return 0;
}

static char *takestr(struct rd *r, uint32_t *lenp)
{
	uint32_t n;
	if (take(r, &n, 4) < 0 || (size_t)(r->end - r->p) < n)
		return NULL;
	char *s = malloc((size_t)n + 1);
	if (!s)
		return NULL;
	memcpy(s, r->p, n);
	s[n] = 0;
	r->p += n;
	if (lenp)
		*lenp = n;
	return s;
}

static char *dupval(const unsigned char *v, uint32_t n)
{
	char *s = malloc((size_t)n + 1);
	if (!s)
		fail(ENOMEM, "plan: out of memory");
	memcpy(s, v, n);
	s[n] = 0;
	return s;
}

static void *grow(void *p, size_t n, size_t size)
{
	if (n >= PSYCH_PLAN_MAX_ITEMS)
		fail(E2BIG, "plan: too many items");
	p = realloc(p, (n + 1) * size);
	if (!p)
		fail(ENOMEM, "plan: out of memory");
	return p;
}

// load_plan reads the plan's memfd whole and checks its magic and version;
// *size is its length.
static unsigned char *load_plan(size_t *size)
{
	struct stat st;
	if (fstat(PSYCH_FD_PLAN, &st) < 0)
		fail(errno, "plan: fstat");
	if (st.st_size < 8 || st.st_size > PSYCH_PLAN_MAX)
		fail(EINVAL, "plan: size %lld", (long long)st.st_size);
	unsigned char *buf = malloc(st.st_size);
	if (!buf)
		fail(ENOMEM, "plan: out of memory");
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = pread(PSYCH_FD_PLAN, buf + got, st.st_size - got, got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail(n < 0 ? errno : EIO, "plan: read");
		got += n;
	}
	uint32_t magic, version;
	memcpy(&magic, buf, 4);
	memcpy(&version, buf + 4, 4);
	if (magic != PSYCH_PLAN_MAGIC || version != PSYCH_PLAN_VERSION)
		fail(EINVAL, "plan: bad magic or version %u", version);
	*size = st.st_size;
	return buf;
}

// Each plan_* below decodes one record's value v of len bytes into pl; -1
// is a malformed record.

static int plan_pair(uint32_t *a, uint32_t *b, struct rd *v, uint32_t len)
{
	if (len != 8)
		return -1;
	take(v, a, 4);
	take(v, b, 4);
	return 0;
}

static int plan_u64(uint64_t *x, struct rd *v, uint32_t len)
{
	if (len != 8)
		return -1;
	take(v, x, 8);
	return 0;
}

static int plan_llpath(struct plan *pl, struct rd *v, uint32_t len)
{
	if (len <= 8)
		return -1;
	pl->llpaths = grow(pl->llpaths, pl->nllpath, sizeof(struct llpath));
	struct llpath *l = &pl->llpaths[pl->nllpath++];
	take(v, &l->access, 8);
	l->path = dupval(v->p, len - 8);
	if (l->path[0] != '/' || strlen(l->path) != len - 8)
		return -1;
	return 0;
}

// plan_str appends a copy of the value to the list *list of *n strings.
static void plan_str(char ***list, size_t *n, struct rd *v, uint32_t len)
{
	*list = grow(*list, *n + 1, sizeof(char *));
	(*list)[(*n)++] = dupval(v->p, len);
}

static int plan_seccomp(struct plan *pl, struct rd *v, uint32_t len)
{
	if (len == 0 || len % 8 != 0 || len / 8 > 0xffff)
		return -1;
	pl->seccomp = dupval(v->p, len);
	pl->seccomplen = len;
	return 0;
}

static int plan_rlimit(struct plan *pl, struct rd *v, uint32_t len)
{
	if (len != 20)
		return -1;
	pl->rlims = grow(pl->rlims, pl->nrlim, sizeof(struct rlim));
	struct rlim *l = &pl->rlims[pl->nrlim++];
	take(v, &l->resource, 4);
	take(v, &l->soft, 8);
	take(v, &l->hard, 8);
	return 0;
}

static int plan_cgroup(struct plan *pl, struct rd *v, uint32_t len)
{
	int32_t fd;
	if (len != 4 || pl->ncgtasks == PSYCH_PLAN_MAX_CGROUPS)
		return -1;
	take(v, &fd, 4);
	if (fd < PSYCH_FD_TREES)
		return -1;
	pl->cgtasks[pl->ncgtasks++] = fd;
	return 0;
}

static int plan_mount(struct plan *pl, struct rd *v)
{
	pl->mnts = grow(pl->mnts, pl->nmnt, sizeof(struct mnt));
	struct mnt *m = &pl->mnts[pl->nmnt++];
	memset(m, 0, sizeof *m);
	if (take(v, &m->kind, 2) < 0 || take(v, &m->flags, 2) < 0 || take(v, &m->fd, 4) < 0 ||
	    take(v, &m->attr, 8) < 0 || take(v, &m->mode, 4) < 0 || !(m->source = takestr(v, NULL)) ||
	    !(m->target = takestr(v, NULL)) || !(m->data = takestr(v, &m->datalen)) || v->p != v->end)
		return -1;
	if (m->target[0] != '/' || strstr(m->target, "/../") || (m->fd >= 0 && m->fd < PSYCH_FD_TREES))
		return -1;
	return 0;
}

// plan_record decodes one record into pl; an unknown tag or a malformed
// record fails the plan step.
static void plan_record(struct plan *pl, uint16_t tag, struct rd *v, uint32_t len)
{
	int r = 0;
	switch (tag) {
	case PSYCH_TAG_OUTER_IDS:
		r = plan_pair(&pl->outer_uid, &pl->outer_gid, v, len);
		break;
	case PSYCH_TAG_INNER_IDS:
		r = plan_pair(&pl->inner_uid, &pl->inner_gid, v, len);
		break;
	case PSYCH_TAG_NAMESPACES:
		r = plan_u64(&pl->flags, v, len);
		break;
	case PSYCH_TAG_LANDLOCK:
		r = plan_u64(&pl->landlock, v, len);
		break;
	case PSYCH_TAG_LANDLOCK_FS:
		r = plan_u64(&pl->landlock_fs, v, len);
		break;
	case PSYCH_TAG_LANDLOCK_PATH:
		r = plan_llpath(pl, v, len);
		break;
	case PSYCH_TAG_HOSTNAME:
		pl->hostname = dupval(v->p, len);
		break;
	case PSYCH_TAG_ROOT:
		pl->root = dupval(v->p, len);
		break;
	case PSYCH_TAG_ROOT_DATA:
		pl->rootdata = dupval(v->p, len);
		break;
	case PSYCH_TAG_CWD:
		pl->cwd = dupval(v->p, len);
		break;
	case PSYCH_TAG_EXE:
		pl->exe = dupval(v->p, len);
		break;
	case PSYCH_TAG_ARG:
		plan_str(&pl->argv, &pl->nargv, v, len);
		break;
	case PSYCH_TAG_ENV:
		plan_str(&pl->envp, &pl->nenvp, v, len);
		break;
	case PSYCH_TAG_SECCOMP:
		r = plan_seccomp(pl, v, len);
		break;
	case PSYCH_TAG_RLIMIT:
		r = plan_rlimit(pl, v, len);
		break;
	case PSYCH_TAG_CGROUP_TASKS:
		r = plan_cgroup(pl, v, len);
		break;
	case PSYCH_TAG_MOUNT:
		r = plan_mount(pl, v);
		break;
	default:
		fail(EINVAL, "plan: unknown tag %u", tag);
	}
	if (r < 0)
		fail(EINVAL, "plan: bad record with tag %u", tag);
}

// plan_complete checks that the plan names what every run needs, and ends
// argv and envp with NULL.
static void plan_complete(struct plan *pl)
{
	if (!pl->exe || pl->nargv == 0 || pl->outer_uid == (uint32_t)-1 || pl->inner_uid == (uint32_t)-1)
		fail(EINVAL, "plan: missing exe, argv or ids");
	if (pl->nmnt && (!pl->root || !pl->rootdata))
		fail(EINVAL, "plan: mounts without a root");
	pl->argv = grow(pl->argv, pl->nargv + 1, sizeof(char *));
	pl->argv[pl->nargv] = NULL;
	pl->envp = grow(pl->envp, pl->nenvp + 1, sizeof(char *));
	pl->envp[pl->nenvp] = NULL;
}

// read_plan reads and decodes the plan (the plan step).
static void read_plan(struct plan *pl)
{
	step = PSYCH_STEP_PLAN;
	size_t size;
	unsigned char *buf = load_plan(&size);
	memset(pl, 0, sizeof *pl);
	pl->outer_uid = pl->outer_gid = pl->inner_uid = pl->inner_gid = (uint32_t)-1;
	struct rd r = {buf + 8, buf + size};
	while (r.p < r.end) {
		uint16_t tag, pad;
		uint32_t len;
		if (take(&r, &tag, 2) < 0 || take(&r, &pad, 2) < 0 || take(&r, &len, 4) < 0 ||
		    (size_t)(r.end - r.p) < len)
			fail(EINVAL, "plan: truncated record");
		struct rd v = {r.p, r.p + len};
		r.p += len;
		plan_record(pl, tag, &v, len);
	}
	free(buf);
	plan_complete(pl);
}

// ---- the mount plan ----

static char *under(const char *root, const char *target)
{
	size_t n = strlen(root) + strlen(target) + 1;
	char *p = malloc(n);
	if (!p)
		fail(ENOMEM, "mount: out of memory");
	snprintf(p, n, "%s%s", root, strcmp(target, "/") ? target : "");
	return p;
}

static void mountpoint(const char *path, int dir)
{
	if (dir) {
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			fail(errno, "mkdir %s", path);
		return;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (fd < 0 && errno != EEXIST && errno != EACCES && errno != EROFS)
		fail(errno, "create %s", path);
	if (fd >= 0)
		close(fd);
}

static void setattr(const char *path, uint64_t set, int recursive)
{
	struct attr a = {.set = set, .propagation = MS_PRIVATE};
	if (syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &a, sizeof a) < 0)
		fail(errno, "mount_setattr %s", path);
}

// mount_root makes the mount namespace private and mounts the new root's
// tmpfs, the working directory while the records are carried out: a
// relative path in a record (an overlay's layers) is in the new root.
static void mount_root(struct plan *pl)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail(errno, "make / private");
	if (mount("tmpfs", pl->root, "tmpfs", MS_NOSUID | MS_NODEV, pl->rootdata) < 0)
		fail(errno, "mount root tmpfs on %s", pl->root);
	if (chdir(pl->root) < 0)
		fail(errno, "chdir %s", pl->root);
}

static void mount_mkdir(const char *path, struct mnt *m)
{
	if (mkdir(path, m->mode) < 0 && errno != EEXIST)
		fail(errno, "mkdir %s", m->target);
	if (chmod(path, m->mode) < 0)
		fail(errno, "chmod %s", m->target);
}

static void mount_file(const char *path, struct mnt *m)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, m->mode);
	if (fd < 0)
		fail(errno, "create %s", m->target);
	for (uint32_t off = 0; off < m->datalen;) {
		ssize_t n = write(fd, m->data + off, m->datalen - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail(errno, "write %s", m->target);
		off += n;
	}
	if (fchmod(fd, m->mode) < 0)
		fail(errno, "chmod %s", m->target);
	close(fd);
}

static void mount_bind(const char *path, struct mnt *m)
{
	int rec = m->flags & PSYCH_MNT_RECURSIVE;
	int src = m->fd;
	if (src < 0) {
		src = syscall(SYS_open_tree, AT_FDCWD, m->source, OPEN_TREE_CLONE | O_CLOEXEC | (rec ? AT_RECURSIVE : 0));
		if (src < 0)
			fail(errno, "open_tree %s", m->source);
	}
	struct stat st;
	if (fstat(src, &st) < 0)
		fail(errno, "fstat tree for %s", m->target);
	mountpoint(path, S_ISDIR(st.st_mode));
	if (syscall(SYS_move_mount, src, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		fail(errno, "move_mount %s", m->target);
	close(src);
	setattr(path, m->attr, rec);
}

static void mount_detach(const char *path, struct mnt *m)
{
	while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		;
	if (errno != EINVAL)
		fail(errno, "detach %s", m->target);
	if (rmdir(path) < 0 && (errno != ENOTDIR || unlink(path) < 0))
		fail(errno, "remove %s", m->target);
}

// mount_one carries out one record at path, its target under the new root.
static void mount_one(const char *path, struct mnt *m)
{
	switch (m->kind) {
	case PSYCH_MNT_MKDIR:
		mount_mkdir(path, m);
		break;
	case PSYCH_MNT_SYMLINK:
		if (symlink(m->source, path) < 0)
			fail(errno, "symlink %s", m->target);
		break;
	case PSYCH_MNT_FILE:
		mount_file(path, m);
		break;
	case PSYCH_MNT_BIND:
		mount_bind(path, m);
		break;
	case PSYCH_MNT_TMPFS:
		mountpoint(path, 1);
		if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | (m->attr & MOUNT_ATTR_NOEXEC ? MS_NOEXEC : 0),
			  m->data) < 0)
			fail(errno, "mount tmpfs %s", m->target);
		break;
	case PSYCH_MNT_PROC:
		mountpoint(path, 1);
		if (mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			fail(errno, "mount proc %s", m->target);
		break;
	case PSYCH_MNT_DEVPTS:
		// Mountable in a user namespace (FS_USERNS_MOUNT); its superblock
		// allows device nodes there, which a nodev mount would refuse
		// again.
		mountpoint(path, 1);
		if (mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, m->data) < 0)
			fail(errno, "mount devpts %s", m->target);
		break;
	case PSYCH_MNT_OVERLAY:
		// The layers are resolved now; the overlay keeps a private clone
		// of each, so their own mounts may be detached after.
		mountpoint(path, 1);
		if (mount("overlay", path, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, m->data) < 0)
			fail(errno, "mount overlay %s (%s)", m->target, m->data);
		setattr(path, m->attr, 0);
		break;
	case PSYCH_MNT_DETACH:
		mount_detach(path, m);
		break;
	default:
		fail(EINVAL, "mount: unknown kind %u", m->kind);
	}
}

// pivot makes the new root read-only, pivots into it and detaches the old.
static void pivot(struct plan *pl)
{
	setattr(pl->root, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0);
	if (chdir(pl->root) < 0)
		fail(errno, "chdir %s", pl->root);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		fail(errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		fail(errno, "detach old root");
}

// do_mounts builds the new root from the mount records and pivots into it
// (the mount step).
static void do_mounts(struct plan *pl)
{
	step = PSYCH_STEP_MOUNT;
	mount_root(pl);
	for (size_t i = 0; i < pl->nmnt; i++) {
		char *path = under(pl->root, pl->mnts[i].target);
		mount_one(path, &pl->mnts[i]);
		free(path);
	}
	pivot(pl);
}

// ---- privileges ----

// drop_bounding empties the bounding set (the caps step); a cap the
// kernel does not know (EINVAL) or that the process may not drop (EPERM,
// no CAP_SETPCAP: the attestation shows what is left) is passed over.
static void drop_bounding(void)
{
	step = PSYCH_STEP_CAPS;
	for (int c = 0; c <= 63; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
			fail(errno, "drop bounding cap %d", c);
}

static void drop_caps(void)
{
	drop_bounding();
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		fail(errno, "clear ambient caps");
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capset, &h, d) < 0)
		fail(errno, "capset");
	if (syscall(SYS_capget, &h, d) < 0)
		fail(errno, "capget");
	for (int i = 0; i < 2; i++)
		if (d[i].effective || d[i].permitted || d[i].inheritable)
			fail(EPERM, "capabilities left after capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(errno, "no_new_privs");
	int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (nnp != 1)
		fail(nnp < 0 ? errno : EPERM, "PR_SET_NO_NEW_PRIVS did not take (%d)", nnp);
}

// Landlock scoping (ABI 6): no abstract Unix socket or signal crosses out of
// the run's domain. The syscall numbers come from the kernel headers; the
// ruleset's layout is spelled out, because a uapi header older than 6.12
// lacks its "scoped" field (the kernel takes the size it is given).
#if !defined(SYS_landlock_create_ruleset) || !defined(SYS_landlock_restrict_self) || !defined(SYS_landlock_add_rule)
#error "the kernel headers lack the Landlock syscalls (linux-libc-dev >= 5.13)"
#endif

struct ll_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_RULE_PATH_BENEATH 1

static void load_landlock(struct plan *pl)
{
	step = PSYCH_STEP_LANDLOCK;
	if (!pl->landlock && !pl->landlock_fs)
		return;
	if (pl->nllpath && !pl->landlock_fs)
		fail(EINVAL, "plan: Landlock paths without handled accesses");
	struct ll_ruleset_attr a = {.handled_access_fs = pl->landlock_fs, .scoped = pl->landlock};
	int fd = syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0);
	if (fd < 0)
		fail(errno, "landlock_create_ruleset");
	for (size_t i = 0; i < pl->nllpath; i++) {
		struct llpath *l = &pl->llpaths[i];
		int pfd = open(l->path, O_PATH | O_CLOEXEC);
		if (pfd < 0) {
			if (errno == ENOENT || errno == EACCES || errno == ENOTDIR)
				continue;
			fail(errno, "landlock: open %s", l->path);
		}
		struct ll_path_beneath_attr r = {.allowed_access = l->access, .parent_fd = pfd};
		if (syscall(SYS_landlock_add_rule, fd, LL_RULE_PATH_BENEATH, &r, 0) < 0)
			fail(errno, "landlock_add_rule %s", l->path);
		close(pfd);
	}
	if (syscall(SYS_landlock_restrict_self, fd, 0) < 0)
		fail(errno, "landlock_restrict_self");
	close(fd);
}

// pdeathsig arms SIGKILL on the parent's death and reads it back.
static void pdeathsig(void)
{
	step = PSYCH_STEP_PDEATHSIG;
	int sig = 0;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(errno, "prctl PR_SET_PDEATHSIG");
	if (prctl(PR_GET_PDEATHSIG, &sig, 0, 0, 0) < 0)
		fail(errno, "prctl PR_GET_PDEATHSIG");
	if (sig != SIGKILL)
		fail(EPERM, "PR_SET_PDEATHSIG did not take (signal %d)", sig);
}

// nondumpable makes the process non-dumpable (no ptrace, /proc/PID owned by
// root) and reads it back.
static void nondumpable(void)
{
	step = PSYCH_STEP_DUMPABLE;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail(errno, "prctl PR_SET_DUMPABLE");
	int d = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
	if (d != 0)
		fail(d < 0 ? errno : EPERM, "PR_SET_DUMPABLE did not take (dumpable %d)", d);
}

static void load_seccomp(struct plan *pl)
{
	step = PSYCH_STEP_SECCOMP;
	if (!pl->seccomp)
		return;
	struct sock_fprog prog = {.len = pl->seccomplen / 8, .filter = (struct sock_filter *)pl->seccomp};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		fail(errno, "load seccomp filter");
}

// ---- the init (C) ----

_Static_assert(PSYCH_LOWER_MAX * PSYCH_LOWER_RECORD <= PSYCH_SYNC_TEXT, "LOWER records fit one message");

// lower serves one host message after the exec: LOWER, which lowers the
// interpreter's rlimits and answers LOWERED. Anything else (EOF: the host
// is gone) returns -1.
static int lower(pid_t child)
{
	struct psych_sync m;
	ssize_t n;
	do
		n = recv(PSYCH_FD_SYNC, &m, sizeof m, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof m || m.type != PSYCH_SYNC_LOWER || m.a < 0 || m.a > PSYCH_LOWER_MAX)
		return -1;
	int32_t res = 0, err = 0;
	for (int i = 0; i < m.a && !err; i++) {
		const char *rec = m.text + i * PSYCH_LOWER_RECORD;
		uint32_t r;
		uint64_t soft, hard;
		memcpy(&r, rec, 4);
		memcpy(&soft, rec + 4, 8);
		memcpy(&hard, rec + 12, 8);
		struct rlimit cur, want = {soft, hard};
		res = (int32_t)r;
		if (syscall(SYS_prlimit64, child, r, NULL, &cur) < 0) {
			err = -errno;
			break;
		}
		if (want.rlim_max > cur.rlim_max)
			want.rlim_max = cur.rlim_max; // never raised
		if (want.rlim_cur > want.rlim_max)
			want.rlim_cur = want.rlim_max;
		if (syscall(SYS_prlimit64, child, r, &want, NULL) < 0)
			err = -errno;
	}
	sendmsg_fd(PSYCH_SYNC_LOWERED, err, err ? res : 0, NULL, -1);
	return 0;
}

// ready sends READY, with a NETLINK_ROUTE socket of the run's network
// namespace when it made one (the init step).
static void ready(struct plan *pl)
{
	step = PSYCH_STEP_INIT;
	int nl = -1;
	if (pl->flags & CLONE_NEWNET) {
		nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
		if (nl < 0)
			fail(errno, "netlink socket");
	}
	sendmsg_fd(PSYCH_SYNC_READY, 0, 0, NULL, nl);
	if (nl >= 0)
		close(nl);
}

// set_hostname sets the hostname of the run's UTS namespace and enters the
// working directory (the hostname step).
static void set_hostname(struct plan *pl)
{
	step = PSYCH_STEP_HOSTNAME;
	if (pl->hostname && (pl->flags & CLONE_NEWUTS) && sethostname(pl->hostname, strlen(pl->hostname)) < 0)
		fail(errno, "sethostname");
	if (pl->cwd && chdir(pl->cwd) < 0)
		fail(errno, "chdir %s", pl->cwd);
}

// set_rlimits lowers the init's rlimits to the plan's, which the
// interpreter inherits (the rlimits step).
static void set_rlimits(struct plan *pl)
{
	step = PSYCH_STEP_RLIMITS;
	for (size_t i = 0; i < pl->nrlim; i++) {
		struct rlimit cur, want = {pl->rlims[i].soft, pl->rlims[i].hard};
		if (getrlimit(pl->rlims[i].resource, &cur) < 0)
			fail(errno, "getrlimit %u", pl->rlims[i].resource);
		if (want.rlim_max > cur.rlim_max)
			want.rlim_max = cur.rlim_max; // only lowering needs no privilege
		if (want.rlim_cur > want.rlim_max)
			want.rlim_cur = want.rlim_max;
		if (setrlimit(pl->rlims[i].resource, &want) < 0)
			fail(errno, "setrlimit %u", pl->rlims[i].resource);
	}
}

// close_fds closes every descriptor from the plan's up: the trees, and
// whatever else was inherited (the fds step).
static void close_fds(void)
{
	step = PSYCH_STEP_FDS;
	if (syscall(SYS_close_range, PSYCH_FD_PLAN, ~0U, 0) < 0)
		fail(errno, "close_range");
}

// drop_ids takes the run's inner ids and checks that uid 0 is gone (the ids
// step).
static void drop_ids(struct plan *pl)
{
	step = PSYCH_STEP_IDS;
	if (pl->rootns) {
		// Still root (namespaces without a user namespace): the bounding
		// set goes while the privilege to drop it is there.
		drop_bounding();
		step = PSYCH_STEP_IDS;
		if (setgroups(0, NULL) < 0)
			fail(errno, "setgroups");
	}
	if (setresgid(pl->inner_gid, pl->inner_gid, pl->inner_gid) < 0)
		fail(errno, "setresgid %u", pl->inner_gid);
	if (setresuid(pl->inner_uid, pl->inner_uid, pl->inner_uid) < 0)
		fail(errno, "setresuid %u", pl->inner_uid);
	if (getuid() == 0 || geteuid() == 0)
		fail(EPERM, "still uid 0 after the drop");
}

// child_fds gives the interpreter its descriptors: in a container, stdin
// from /dev/null (the engine's is not the program's); else the program's
// channel as PSYCH_FD_PROGRAM_WIRE. -1 with errno on failure.
static int child_fds(void)
{
	if (container) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0)
			return -1;
		close(null);
		return 0;
	}
	if (dup2(PSYCH_FD_WIRE, PSYCH_FD_PROGRAM_WIRE) < 0)
		return -1;
	close(PSYCH_FD_WIRE);
	return 0;
}

// exec_child runs in the forked interpreter: default signals, an empty
// mask, no sync socket, its descriptors, then execve. A failure's errno
// goes to the init over ep.
__attribute__((noreturn)) static void exec_child(struct plan *pl, int ep)
{
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close(PSYCH_FD_SYNC);
	if (child_fds() == 0)
		execve(pl->exe, pl->argv, pl->envp);
	int e = errno;
	while (write(ep, &e, sizeof e) < 0 && errno == EINTR)
		;
	_exit(127);
}

// spawn forks and execs the interpreter and reports EXEC with its pid (the
// exec step); *sfd is a signalfd for SIGCHLD, which stays blocked. Only
// the sync socket and the signalfd stay open in the init.
static pid_t spawn(struct plan *pl, int *sfd)
{
	step = PSYCH_STEP_EXEC;
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, &old) < 0)
		fail(errno, "block SIGCHLD");
	*sfd = signalfd(-1, &chld, SFD_CLOEXEC);
	if (*sfd < 0)
		fail(errno, "signalfd");
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0)
		fail(errno, "pipe");
	pid_t child = fork();
	if (child < 0)
		fail(errno, "fork interpreter");
	if (child == 0)
		exec_child(pl, ep[1]);
	close(ep[1]);
	// EOF on the close-on-exec pipe: the exec succeeded.
	int e = 0;
	ssize_t n;
	do
		n = read(ep[0], &e, sizeof e);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		waitpid(child, NULL, 0);
		fail(e, "exec %s", pl->exe);
	}
	close(ep[0]);
	say(PSYCH_SYNC_EXEC, child);
	close(0);
	close(1);
	close(2);
	if (!container) // in a container fd 4 was never the wire: it may be sfd
		close(PSYCH_FD_WIRE);
	return child;
}

// reap serves the host (LOWER) and reaps every child as pid 1 until the
// interpreter exits, reports its EXIT and exits with it; the host's EOF
// ends it at once.
__attribute__((noreturn)) static void reap(pid_t child, int sfd)
{
	struct pollfd pf[2] = {{.fd = PSYCH_FD_SYNC, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
	for (;;) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(PSYCH_EXIT_SETUP);
		}
		if (pf[0].revents && lower(child) < 0)
			_exit(PSYCH_EXIT_HOST_GONE); // the host closed or died
		if (pf[1].revents & (POLLNVAL | POLLERR))
			_exit(PSYCH_EXIT_SETUP); // never spin on a broken signalfd
		if (!pf[1].revents)
			continue;
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof si) < 0 && errno == EINTR)
			;
		for (;;) {
			int st;
			pid_t p = waitpid(-1, &st, WNOHANG);
			if (p <= 0)
				break;
			if (p == child) {
				say(PSYCH_SYNC_EXIT, st);
				// A container's exit code is all an engine reports.
				if (container)
					_exit(WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st));
				_exit(0);
			}
		}
	}
}

// init is C, the run's pid 1: one function per step, each setting the
// step a failure names (nsexec.h).
__attribute__((noreturn)) static void init(struct plan *pl)
{
	pdeathsig();
	ready(pl);
	// From here to the go-ahead the init works while the host checks the
	// network namespace: no line of the program runs before GO.
	if (pl->nmnt)
		do_mounts(pl);
	set_hostname(pl);
	set_rlimits(pl);
	close_fds();
	drop_ids(pl);
	// A uid change resets both.
	pdeathsig();
	nondumpable();
	drop_caps();
	load_landlock(pl);
	await(PSYCH_SYNC_GO);
	load_seccomp(pl);
	int sfd;
	pid_t child = spawn(pl, &sfd);
	reap(child, sfd);
}

// ---- P: the first process ----

// write_map writes data to /proc/self/<file>.
static void write_map(const char *file, const char *data)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/%s", file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		fail(errno, "open %s", path);
	size_t n = strlen(data);
	ssize_t w;
	do
		w = write(fd, data, n);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)n)
		fail(w < 0 ? errno : EIO, "write %s", path);
	close(fd);
}

// write_maps maps the inner ids onto the outer ids P runs as, one each, in
// the user namespace P just made; setgroups is denied first, as the kernel
// wants of a process that maps its own gid.
static void write_maps(struct plan *pl)
{
	char m[64];
	// P's id change made it non-dumpable, which gives /proc/self to the
	// init user namespace's root: dumpable for the writes only (what could
	// reach it then runs as P's own outer ids).
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		fail(errno, "prctl PR_SET_DUMPABLE");
	write_map("setgroups", "deny");
	snprintf(m, sizeof m, "%u %u 1", pl->inner_uid, pl->outer_uid);
	write_map("uid_map", m);
	snprintf(m, sizeof m, "%u %u 1", pl->inner_gid, pl->outer_gid);
	write_map("gid_map", m);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail(errno, "prctl PR_SET_DUMPABLE");
}

// join_cgroups makes P a member of each v1 cgroup the host opened the
// tasks file of, by writing "0" (itself): P is single-threaded, so the
// kernel skips the global threadgroup lock a pid written to cgroup.procs
// takes (a synchronize_rcu on this path).
static void join_cgroups(struct plan *pl)
{
	step = PSYCH_STEP_CGROUP;
	for (size_t i = 0; i < pl->ncgtasks; i++) {
		ssize_t n;
		do
			n = write(pl->cgtasks[i], "0", 1);
		while (n < 0 && errno == EINTR);
		if (n != 1)
			fail(n < 0 ? errno : EIO, "join cgroup (fd %d)", pl->cgtasks[i]);
		close(pl->cgtasks[i]);
	}
}

__attribute__((noreturn)) static void run(void)
{
	static struct plan pl;
	read_plan(&pl);
	join_cgroups(&pl);
	step = PSYCH_STEP_IDS;
	if (pl.outer_uid == 0 || pl.outer_gid == 0)
		fail(EPERM, "outer uid/gid 0 is never used");
	// A root host without user namespaces: the namespaces are made as root,
	// and the init builds the view as root, then drops straight to the run
	// ids (the inner ids are the outer ones), before anything of the
	// program runs.
	int rootns = pl.rootns = geteuid() == 0 && pl.flags && !(pl.flags & CLONE_NEWUSER);
	if (rootns && (pl.inner_uid != pl.outer_uid || pl.inner_gid != pl.outer_gid))
		fail(EINVAL, "plan: namespaces without a user namespace need inner ids equal to the outer ones");
	if (rootns) {
		if (setgroups(0, NULL) < 0)
			fail(errno, "setgroups");
		pdeathsig();
		step = PSYCH_STEP_NAMESPACES;
		if (unshare(pl.flags) < 0)
			fail(errno, "unshare namespaces %#llx", (unsigned long long)pl.flags);
	} else if (geteuid() == 0) {
		// A root host starts this process as root only so that it can exec
		// the host binary; the outer run ids are taken at once. Without a
		// user namespace (whose init gets a bounding set of its own), the
		// bounding set goes first, while the privilege to drop it is there.
		// (A root without CAP_SETPCAP keeps it: the attestation shows it.)
		if (!(pl.flags & CLONE_NEWUSER)) {
			drop_bounding();
			step = PSYCH_STEP_IDS;
		}
		// Where setgroups is denied (a user namespace), having none is enough.
		if (setgroups(0, NULL) < 0 && getgroups(0, NULL) != 0)
			fail(errno, "setgroups");
		if (setresgid(pl.outer_gid, pl.outer_gid, pl.outer_gid) < 0)
			fail(errno, "setresgid %u", pl.outer_gid);
		if (setresuid(pl.outer_uid, pl.outer_uid, pl.outer_uid) < 0)
			fail(errno, "setresuid %u", pl.outer_uid);
	}
	if (!rootns && (geteuid() != pl.outer_uid || getegid() != pl.outer_gid))
		fail(EPERM, "running as %u:%u, want %u:%u", geteuid(), getegid(), pl.outer_uid, pl.outer_gid);
	pdeathsig();
	if (pl.flags & CLONE_NEWUSER) {
		step = PSYCH_STEP_USERNS;
		if (unshare(CLONE_NEWUSER) < 0)
			fail(errno, "unshare user namespace");
		// A process may map its own ids, and only those, into the user
		// namespace it made: the inner ids are the outer ones P runs as.
		write_maps(&pl);
		step = PSYCH_STEP_NAMESPACES;
		if (unshare(pl.flags & ~(uint64_t)CLONE_NEWUSER) < 0)
			fail(errno, "unshare namespaces %#llx", (unsigned long long)pl.flags);
	}
	step = PSYCH_STEP_CLONE;
	// The init speaks only after P's report: it waits for EOF on this pipe,
	// which P gives once PID is sent, so the host reads PID before READY.
	int order[2];
	if (pipe2(order, O_CLOEXEC) < 0)
		fail(errno, "pipe");
	pid_t c = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, NULL, NULL, 0);
	if (c < 0)
		fail(errno, "clone init");
	if (c == 0) {
		char b;
		close(order[1]);
		while (read(order[0], &b, 1) < 0 && errno == EINTR)
			;
		close(order[0]);
		init(&pl);
	}
	say(PSYCH_SYNC_PID, c);
	close(order[1]); // the init goes on now, not after P's exit
	_exit(0);
}

// ---- forkserver: P without an exec ----

// clone_args as linux/sched.h has it since 5.7 (not every libc header does).
struct psych_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
		cgroup;
};

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

// host_pid is the fork server's parent, the host.
static pid_t host_pid;

// start_p runs in the forked P: it moves the request's descriptors to the
// numbers P expects (first above all of them, so that no move overwrites
// one still to be moved), closes everything else, and runs the plan.
__attribute__((noreturn)) static void start_p(int *fds, int nfds, int cgroup)
{
	// P is the host's child (CLONE_PARENT): it dies with it, and a host
	// that died before this took effect ends it here.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != host_pid)
		_exit(PSYCH_EXIT_HOST_GONE);
	int hi = PSYCH_FD_TREES + nfds + 1, tmp[PSYCH_FORK_MAX_FDS], n = 0;
	for (int i = 0; i < nfds; i++) {
		if (i == cgroup)
			continue;
		if ((tmp[n++] = fcntl(fds[i], F_DUPFD_CLOEXEC, hi)) < 0)
			_exit(PSYCH_EXIT_SETUP);
	}
	for (int i = 0; i < n; i++)
		if (dup2(tmp[i], i) < 0)
			_exit(PSYCH_EXIT_SETUP);
	syscall(SYS_close_range, n, ~0U, 0);
	if (setsid() < 0)
		_exit(PSYCH_EXIT_SETUP);
	run();
}

// fork_p clones P for one request; it returns P's pid and pidfd, or
// -errno.
static int fork_p(int *fds, int nfds, uint32_t cgroup, int *pidfd)
{
	struct psych_clone_args ca;
	memset(&ca, 0, sizeof ca);
	ca.flags = CLONE_PARENT | CLONE_PIDFD;
	ca.pidfd = (uint64_t)(uintptr_t)pidfd;
	// With CLONE_PARENT the exit signal is the server's own: SIGCHLD.
	if (cgroup != PSYCH_FORK_NO_CGROUP) {
		ca.flags |= CLONE_INTO_CGROUP;
		ca.cgroup = (uint64_t)fds[cgroup];
	}
	long pid = syscall(SYS_clone3, &ca, sizeof ca);
	if (pid < 0)
		return -errno;
	if (pid == 0)
		start_p(fds, nfds, cgroup == PSYCH_FORK_NO_CGROUP ? -1 : (int)cgroup);
	return (int)pid;
}

__attribute__((noreturn)) static void run_forkserver(void)
{
	// Only the request socket stays; the host's death is EOF on it, and
	// the death signal besides.
	syscall(SYS_close_range, PSYCH_FD_SYNC + 1, ~0U, 0);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(PSYCH_EXIT_SETUP);
	host_pid = getppid();
	for (;;) {
		struct psych_fork_req req;
		char cbuf[CMSG_SPACE(sizeof(int) * PSYCH_FORK_MAX_FDS)];
		struct iovec iov = {.iov_base = &req, .iov_len = sizeof req};
		struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
		ssize_t n = recvmsg(PSYCH_FD_SYNC, &h, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		int fds[PSYCH_FORK_MAX_FDS], nfds = 0;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
				if (nfds < PSYCH_FORK_MAX_FDS)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
		struct psych_fork_reply rep = {.pid = -EINVAL};
		int pidfd = -1;
		if (n == (ssize_t)sizeof req && req.magic == PSYCH_FORK_MAGIC && !(h.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) &&
		    nfds >= PSYCH_FD_TREES && (req.cgroup == PSYCH_FORK_NO_CGROUP || req.cgroup == (uint32_t)nfds - 1))
			rep.pid = fork_p(fds, nfds, req.cgroup, &pidfd);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		send_with_fd(&rep, sizeof rep, rep.pid > 0 ? pidfd : -1);
		if (pidfd >= 0)
			close(pidfd);
	}
}

// ---- container: pid 1 of a container an engine started ----

// dupto moves fd to exactly target, close-on-exec.
static int dupto(int fd, int target)
{
	if (fd == target)
		return 0;
	if (dup3(fd, target, O_CLOEXEC) < 0)
		return -1;
	close(fd);
	return 0;
}

__attribute__((noreturn)) static void run_container(void)
{
	static struct plan pl;
	container = 1;
	const char *dir = getenv(PSYCH_ENV_DIR);
	if (!dir || !*dir)
		dir = PSYCH_CONTAINER_DIR;
	// Nothing the engine left open reaches the interpreter; the sync socket
	// comes first, so that every later failure can be reported.
	syscall(SYS_close_range, PSYCH_FD_SYNC, ~0U, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if ((size_t)snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, PSYCH_CONTAINER_SYNC) >= sizeof sa.sun_path)
		_exit(PSYCH_EXIT_SETUP);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		_exit(PSYCH_EXIT_SETUP);
	int r;
	do
		r = connect(s, (struct sockaddr *)&sa, sizeof sa);
	while (r < 0 && errno == EINTR);
	if (r < 0 || dupto(s, PSYCH_FD_SYNC) < 0)
		_exit(PSYCH_EXIT_SETUP);
	step = PSYCH_STEP_PLAN;
	char path[sizeof sa.sun_path + 16];
	snprintf(path, sizeof path, "%s/%s", dir, PSYCH_CONTAINER_PLAN);
	int pf = open(path, O_RDONLY | O_CLOEXEC);
	if (pf < 0)
		fail(errno, "open %s", path);
	if (dupto(pf, PSYCH_FD_PLAN) < 0)
		fail(errno, "dup plan");
	read_plan(&pl);
	step = PSYCH_STEP_IDS;
	if (pl.outer_uid == 0 || pl.outer_gid == 0 || pl.inner_uid == 0 || pl.inner_gid == 0)
		fail(EPERM, "uid/gid 0 is never used");
	if (geteuid() != pl.outer_uid || getegid() != pl.outer_gid)
		fail(EPERM, "running as %u:%u, want %u:%u", geteuid(), getegid(), pl.outer_uid, pl.outer_gid);
	if (pl.flags || pl.nmnt || pl.root)
		fail(EINVAL, "a container's plan makes no namespaces and no mounts");
	init(&pl);
}

// ---- the in-process probe ----

// probe is what the probe's child shares with the host thread that made it
// (CLONE_VM): the ids to take, and the answer.
struct probe {
	uint32_t uid, gid;
	int result; // 1, 0, 2, or -errno (psych_probe_userns)
	int why;    // the errno of the refusal, for 0 and 2
	char stack[2][32768] __attribute__((aligned(16)));
};

// probe_grandchild runs in the new user namespace: making a UTS namespace
// there needs CAP_SYS_ADMIN in it, as P's namespaces do, and costs nothing
// to copy.
static int probe_grandchild(void *arg)
{
	(void)arg;
	// Its exit status is the errno (1-255), 0 when it worked.
	if (syscall(SYS_unshare, CLONE_NEWUTS) < 0)
		return errno > 0 && errno < 256 ? errno : EPERM;
	return 0;
}

// probe_child runs in the host's memory, on its own stack, with every
// signal blocked (the host's handlers are Go's, for Go's threads only). It
// makes raw syscalls only: its credentials are its own, but glibc's set*id
// would signal the host's threads. A user namespace that grants no
// capabilities (Ubuntu's AppArmor restriction) is as good as none, so the
// grandchild, made in a new user namespace, must make a namespace in it.
static int probe_child(void *arg)
{
	struct probe *p = arg;
	// The ids first: a host that cannot take them cannot run anything.
	p->result = 2;
	p->why = EPERM;
	if (syscall(SYS_geteuid) == 0 &&
	    ((syscall(SYS_setgroups, 0, NULL) < 0 && syscall(SYS_getgroups, 0, NULL) != 0) ||
	     syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0 ||
	     syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0)) {
		p->why = errno;
		return 0;
	}
	if ((uint32_t)syscall(SYS_geteuid) != p->uid || (uint32_t)syscall(SYS_getegid) != p->gid)
		return 0;
	// Whatever the kernel answers here (EPERM, ENOSPC, EACCES, EINVAL...)
	// is a host without user namespaces for these ids, never a fault.
	p->result = 0;
	pid_t g = clone(probe_grandchild, p->stack[1] + sizeof p->stack[1],
			CLONE_VM | CLONE_VFORK | CLONE_NEWUSER, NULL);
	if (g < 0) {
		p->why = errno;
		return 0;
	}
	int st = 0;
	long r;
	while ((r = syscall(SYS_wait4, g, &st, __WALL, NULL)) < 0 && errno == EINTR)
		;
	if (r < 0) {
		p->result = -ECHILD;
		return 0;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		p->result = 1;
	else
		p->why = WIFEXITED(st) ? WEXITSTATUS(st) : EPERM;
	return 0;
}

// psych_probe_userns makes, without forking the host's memory or
// starting a program, a child (CLONE_VM|CLONE_VFORK) that takes gid/uid
// as P does and then makes a grandchild in a new user namespace, which
// makes a UTS namespace there. It returns 1 when that worked; 0 when the
// kernel refused the namespace or a namespace in it, and 2 when the child
// could not take the ids, each with *why the errno; -errno when the probe
// itself failed.
int psych_probe_userns(uint32_t uid, uint32_t gid, int *why)
{
	*why = 0;
	if (uid == 0 || gid == 0)
		return -EPERM;
	struct probe *p = malloc(sizeof *p);
	if (!p)
		return -ENOMEM;
	p->uid = uid;
	p->gid = gid;
	p->result = -EIO;
	p->why = 0;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t c = clone(probe_child, p->stack[0] + sizeof p->stack[0], CLONE_VM | CLONE_VFORK, p);
	int err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (c < 0) {
		free(p);
		return -err;
	}
	int st;
	while (waitpid(c, &st, __WALL) < 0)
		if (errno != EINTR) {
			err = errno;
			free(p);
			return -err;
		}
	int r = p->result;
	*why = p->why;
	free(p);
	return r;
}

// ---- netns: a NETLINK_ROUTE socket from another network namespace ----

__attribute__((noreturn)) static void run_netns(void)
{
	step = PSYCH_STEP_NAMESPACES;
	if (setns(PSYCH_FD_WIRE, CLONE_NEWNET) < 0)
		fail(errno, "setns net");
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0)
		fail(errno, "netlink socket");
	sendmsg_fd(PSYCH_SYNC_READY, 0, 0, NULL, nl);
	_exit(0);
}

__attribute__((constructor)) static void psych_nsexec(void)
{
	const char *m = getenv(PSYCH_MARKER);
	if (!m)
		return;
	if (strcmp(m, PSYCH_MARKER_INIT) == 0)
		run();
	if (strcmp(m, PSYCH_MARKER_CONTAINER) == 0)
		run_container();
	if (strcmp(m, PSYCH_MARKER_NETNS) == 0)
		run_netns();
	if (strcmp(m, PSYCH_MARKER_FORKSERVER) == 0)
		run_forkserver();
	// An unknown marker value: refuse rather than start the host program.
	_exit(PSYCH_EXIT_SETUP);
}

/*
 * ctlproto.c — see ctlproto.h.
 */
#include "ctlproto.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int ctl_sock_dir(char *out, size_t n, const char *xdg, uid_t uid)
{
	struct stat st;
	/* A runtime directory is only used when it is really this user's:
	 * a service may inherit someone else's XDG_RUNTIME_DIR. The CLI
	 * applies the same rule to the target's environment. */
	if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid) {
		int w = snprintf(out, n, "%s/strata", xdg);
		if (w > 0 && (size_t)w < n)
			return 0;
	}
	int w = snprintf(out, n, "/tmp/strata-%u", (unsigned)uid);
	return w > 0 && (size_t)w < n ? 0 : -1;
}

int ctl_sock_path(char *out, size_t n, const char *dir, pid_t pid)
{
	struct sockaddr_un sa;
	size_t lim = n < sizeof(sa.sun_path) ? n : sizeof(sa.sun_path);
	int w = snprintf(out, lim, "%s/%d.sock", dir, (int)pid);
	return w > 0 && (size_t)w < lim ? 0 : -1;
}

int ctl_prepare_dir(const char *dir)
{
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	struct stat st;
	if (lstat(dir, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		/* A symlink, a file, or another user's directory planted
		 * where ours belongs: never put a socket there. */
		errno = EPERM;
		return -1;
	}
	if ((st.st_mode & 077) && chmod(dir, 0700) != 0) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int ctl_send(int sock, const char *msg, size_t len, int fd)
{
	struct iovec iov = { (void *)msg, len };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr mh;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t w;
	do
		w = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)len ? 0 : -1;
}

long ctl_recv(int sock, char *buf, size_t n, int *fd)
{
	*fd = -1;
	struct iovec iov = { buf, n - 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct msghdr mh;
	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	ssize_t r;
	do
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int d;
			memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = d;
			else
				close(d);
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		errno = EMSGSIZE;
		return -1;
	}
	buf[r] = 0;
	return (long)r;
}

const char *ctl_get(const char *msg, const char *key, char *out, size_t n)
{
	size_t kl = strlen(key);
	if (n)
		out[0] = 0;
	/* Keys live on the lines after the first. */
	const char *p = strchr(msg, '\n');
	while (p) {
		p++;
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		if (ll > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
			size_t vl = ll - kl - 1;
			if (n) {
				if (vl >= n)
					vl = n - 1;
				memcpy(out, p + kl + 1, vl);
				out[vl] = 0;
			}
			return out;
		}
		p = nl;
	}
	return NULL;
}

/* A decimal number of digits only, at most max; 0 for anything else. */
static unsigned long digits(const char *s, unsigned long max)
{
	unsigned long v = 0;
	size_t k = 0;
	for (; s[k] >= '0' && s[k] <= '9'; k++) {
		v = v * 10 + (unsigned long)(s[k] - '0');
		if (v > max)
			return 0;
	}
	return k && !s[k] ? v : 0;
}

int ctl_parse_request(const char *msg, struct ctl_request *r, char *err, size_t errlen)
{
	static const struct {
		const char *name;
		enum ctl_cmd cmd;
	} cmds[] = {
		{ "status", CTL_STATUS }, { "start", CTL_START }, { "stop", CTL_STOP }, { "attach", CTL_ATTACH },
		{ "detach", CTL_DETACH }, { "dump", CTL_DUMP }, { "flush", CTL_FLUSH }, { "send", CTL_SEND },
	};
	memset(r, 0, sizeof(*r));
	if (errlen)
		err[0] = 0;
	size_t cl = strcspn(msg, "\n");
	if (cl >= sizeof(r->name))
		cl = sizeof(r->name) - 1;
	memcpy(r->name, msg, cl);
	r->name[cl] = 0;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(r->name, cmds[i].name))
			r->cmd = cmds[i].cmd;
	char num[32];
	if (r->cmd == CTL_SEND || r->cmd == CTL_ATTACH) {
		r->has_send = ctl_get(msg, r->cmd == CTL_SEND ? "dir" : "send", r->send_dir, sizeof(r->send_dir)) &&
			      r->send_dir[0];
		r->every = ctl_get(msg, "every", num, sizeof(num)) ? digits(num, UINT32_MAX) : 15000;
		r->queue = ctl_get(msg, "queue", num, sizeof(num)) ? digits(num, UINT32_MAX) : 8;
		r->send_stop = r->cmd == CTL_SEND && ctl_get(msg, "stop", num, sizeof(num));
	}
	if (r->cmd != CTL_ATTACH)
		return 0;
	r->has_path = ctl_get(msg, "path", r->path, sizeof(r->path)) != NULL;
	r->create = ctl_get(msg, "create", num, sizeof(num)) && !strcmp(num, "1");
	r->paused = ctl_get(msg, "paused", num, sizeof(num)) && !strcmp(num, "1");
	if (ctl_get(msg, "rate", num, sizeof(num))) {
		/* Digits only, in range: strtoul would take "-1" or
		 * 4294967396 and wrap them into one. */
		unsigned long v = digits(num, CTL_RATE_MAX);
		if (!v) {
			if (errlen)
				snprintf(err, errlen, "rate %s is out of range (1..%d)", num, CTL_RATE_MAX);
			return -1;
		}
		r->rate = (unsigned)v;
	}
	return 0;
}

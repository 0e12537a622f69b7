/*
 * top-target.c — the program `strata top` watches.
 *
 * A command is run under `strata record` (this same executable), so every
 * option record has (-F, --mode, --native, -e, ...) means the same here
 * and the profile is written the same way; the view tails that file. When
 * the view owns the terminal, record and the program get their own
 * process group (Ctrl-C is the view's to handle), no terminal input, and
 * their output goes to a log file. The program's Python processes are the
 * descendants of that record that have a control channel, which is how
 * sampling is turned on and off in all of them, and how they are detached
 * when the user leaves the program running.
 *
 * With --pid the view attaches instead (attach.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "top.h"
#include "common/procstat.h"
#include "common/ctlproto.h"
#include "cli/attach/ctlclient.h"

static int make_temp(char *out, size_t n, const char *suffix)
{
	const char *td = getenv("TMPDIR");
	snprintf(out, n, "%s/strata-top-XXXXXX%s", td && *td ? td : "/tmp", suffix);
	int fd = mkstemps(out, (int)strlen(suffix));
	if (fd < 0)
		out[0] = 0;
	return fd;
}

int target_open(struct top_target *t, const struct top_launch *l, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (l->output) {
		snprintf(t->file, sizeof(t->file), "%s", l->output);
	} else {
		int fd = make_temp(t->file, sizeof(t->file), ".strata");
		if (fd < 0) {
			snprintf(err, errlen, "cannot create a temporary profile: %s", strerror(errno));
			return -1;
		}
		close(fd);
		t->temp_file = 1;
	}
	if (!l->argv) {
		if (attach_start(&t->att, l->pid, t->file, l->rate_hz, 0, 1, l->want, err, errlen)) {
			target_close(t);
			return -1;
		}
		if (!t->att.ours) {
			/* Recorded by someone else already: read their file. */
			if (t->temp_file)
				unlink(t->file);
			t->temp_file = 0;
			snprintf(t->file, sizeof(t->file), "%s", t->att.output);
		}
		return 0;
	}

	int logfd = -1;
	if (l->redirect) {
		logfd = make_temp(t->log, sizeof(t->log), ".log");
		if (logfd < 0) {
			snprintf(err, errlen, "cannot create a log file for the program's output: %s", strerror(errno));
			target_close(t);
			return -1;
		}
	}
	char exe[PATH_MAX];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (el <= 0) {
		snprintf(err, errlen, "cannot find the strata executable: %s", strerror(errno));
		if (logfd >= 0)
			close(logfd);
		target_close(t);
		return -1;
	}
	exe[el] = 0;
	int nargs = 0;
	while (l->argv[nargs])
		nargs++;
	char **av = calloc((size_t)(nargs + l->nrecord_opts + 8), sizeof(*av));
	if (!av) {
		snprintf(err, errlen, "out of memory");
		target_close(t);
		return -1;
	}
	int n = 0;
	av[n++] = exe;
	av[n++] = "record";
	av[n++] = "-q";
	av[n++] = "-o";
	av[n++] = t->file;
	for (int i = 0; i < l->nrecord_opts; i++)
		av[n++] = l->record_opts[i];
	av[n++] = "--";
	for (int i = 0; i < nargs; i++)
		av[n++] = l->argv[i];
	av[n] = NULL;
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		free(av);
		if (logfd >= 0)
			close(logfd);
		target_close(t);
		return -1;
	}
	if (pid == 0) {
		if (l->redirect) {
			setpgid(0, 0);
			int nul = open("/dev/null", O_RDONLY);
			if (nul >= 0)
				dup2(nul, 0);
			dup2(logfd, 1);
			dup2(logfd, 2);
		}
		execv(exe, av);
		_exit(127);
	}
	if (l->redirect)
		setpgid(pid, pid); /* both sides, so neither races the other */
	free(av);
	if (logfd >= 0)
		close(logfd);
	t->started = 1;
	t->record_pid = pid;
	t->own_group = l->redirect;
	return 0;
}

int target_alive(struct top_target *t)
{
	if (t->ended)
		return 0;
	if (t->started) {
		int st;
		pid_t r = waitpid(t->record_pid, &st, WNOHANG);
		if (r == t->record_pid || (r < 0 && errno == ECHILD)) {
			t->ended = 1;
			t->status = r == t->record_pid ? st : 0;
		}
	} else if (!attach_alive(t->att.pid)) {
		t->ended = 1;
	}
	return !t->ended;
}

/* ppid of pid from /proc/PID/stat, or -1. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	const char *f = rp ? procstat_field(rp, 4) : NULL;
	return f ? (pid_t)atoi(f) : -1;
}

int target_pids(struct top_target *t, pid_t *out, int max)
{
	if (!t->started) {
		if (max < 1 || t->ended)
			return 0;
		out[0] = t->att.pid;
		return 1;
	}
	if (t->ended)
		return 0;
	/* Descendants of the record process, breadth first, from one pass
	 * over /proc. */
	enum { MAXP = 32768 };
	static pid_t pids[MAXP], ppids[MAXP];
	int np = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d)) && np < MAXP) {
		char *end;
		long v = strtol(e->d_name, &end, 10);
		if (v <= 0 || *end)
			continue;
		pid_t pp = parent_of((pid_t)v);
		if (pp > 0) {
			pids[np] = (pid_t)v;
			ppids[np] = pp;
			np++;
		}
	}
	if (d)
		closedir(d);
	pid_t queue[1024];
	int qh = 0, qt = 0, n = 0;
	queue[qt++] = t->record_pid;
	while (qh < qt && n < max) {
		pid_t parent = queue[qh++];
		for (int i = 0; i < np && qt < 1024; i++) {
			if (ppids[i] != parent)
				continue;
			queue[qt++] = pids[i];
			char path[108], err[512];
			if (n < max && ctl_find(pids[i], path, sizeof(path), err, sizeof(err)) == 0)
				out[n++] = pids[i];
		}
	}
	return n;
}

int target_set_sampling(struct top_target *t, int on, char *err, size_t errlen)
{
	if (!t->started)
		return attach_sampling(&t->att, on, err, errlen);
	pid_t pids[64];
	int n = target_pids(t, pids, 64), ok = 0;
	char reply[CTL_MSG_MAX];
	snprintf(err, errlen, "no process of the program has a control channel yet");
	for (int i = 0; i < n; i++)
		if (ctl_call(pids[i], on ? "start" : "stop", -1, reply, sizeof(reply), 3000, err, errlen) == 0)
			ok++;
	return ok ? 0 : -1;
}

int target_sampling(struct top_target *t)
{
	pid_t pid;
	if (target_pids(t, &pid, 1) < 1)
		return -1;
	char reply[CTL_MSG_MAX], err[512], v[16];
	if (ctl_call(pid, "status", -1, reply, sizeof(reply), 2000, err, sizeof(err)))
		return -1;
	return !strcmp(ctl_value(reply, "sampling", v, sizeof(v)), "on");
}

int target_leave(struct top_target *t, char *err, size_t errlen)
{
	if (!t->started)
		return attach_end(&t->att, err, errlen);
	pid_t pids[64];
	int n = target_pids(t, pids, 64);
	char reply[CTL_MSG_MAX];
	int rc = 0;
	/* Each agent ends its stream and closes the profile: the program
	 * runs on at no cost, ready to be attached to again. */
	for (int i = 0; i < n; i++)
		if (ctl_call(pids[i], "detach", -1, reply, sizeof(reply), 5000, err, errlen) < 0)
			rc = -1;
	return rc;
}

void target_wait(struct top_target *t, int ms)
{
	for (int waited = 0; waited < ms && target_alive(t); waited += 20) {
		struct timespec ts = { 0, 20 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

void target_stop(struct top_target *t, int sig)
{
	if (!t->started || !target_alive(t))
		return;
	/* SIGINT is what Ctrl-C would have sent the program's group;
	 * strata record passes SIGTERM and SIGHUP on by itself. */
	if (sig == SIGINT && t->own_group)
		kill(-t->record_pid, SIGINT);
	else if (sig != SIGINT)
		kill(t->record_pid, sig);
	target_wait(t, 5000);
	if (target_alive(t)) {
		kill(t->record_pid, SIGTERM);
		target_wait(t, 3000);
	}
	if (target_alive(t)) {
		pid_t pids[64];
		int n = target_pids(t, pids, 64);
		for (int i = 0; i < n; i++)
			kill(pids[i], SIGKILL);
		if (t->own_group)
			kill(-t->record_pid, SIGKILL);
		target_wait(t, 3000);
	}
}

void target_close(struct top_target *t)
{
	if (t->temp_file && t->file[0])
		unlink(t->file);
	t->temp_file = 0;
	struct stat st;
	if (t->log[0] && stat(t->log, &st) == 0 && st.st_size == 0) {
		unlink(t->log);
		t->log[0] = 0;
	}
}

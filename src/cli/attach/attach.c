/*
 * attach.c — see attach.h.
 */
#include "attach.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procstat.h"
#include "common/ctlproto.h"
#include "common/format.h"
#include "cli/builtin.h"
#include "ctlclient.h"
#include "inject.h"

int attach_alive(pid_t pid)
{
	if (kill(pid, 0) != 0 && errno != EPERM)
		return 0;
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	const char *state = rp ? procstat_field(rp, 3) : NULL;
	return state && *state != 'Z' && *state != 'X';
}

int agent_helper_alive(pid_t pid)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	char want[64];
	int wl = snprintf(want, sizeof(want), "strata-agentd%c%d", 0, (int)pid) + 1;
	struct dirent *e;
	int found = 0;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[300], buf[64];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		close(fd);
		if (n >= wl && !memcmp(buf, want, (size_t)wl) && attach_alive((pid_t)strtol(e->d_name, NULL, 10)))
			found = 1;
	}
	closedir(d);
	return found;
}

/* The helpers holding `path` open with a process they serve alive
 * (alive = 1: up to max of those pids into pids), or with none alive
 * (alive = 0: the pids they were started for). */
static int helpers_holding(const char *path, pid_t *pids, int max, int alive)
{
	struct stat want;
	if (stat(path, &want))
		return 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	static const char name[] = "strata-agentd";
	int n = 0;
	struct dirent *e;
	while (n < max && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char p[300], buf[64];
		snprintf(p, sizeof(p), "/proc/%s/cmdline", e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= (ssize_t)sizeof(name) || memcmp(buf, name, sizeof(name)))
			continue;
		buf[len] = 0;
		pid_t target = (pid_t)strtol(buf + sizeof(name), NULL, 10);
		/* The processes it serves: the one that started it (its
		 * command line), and every process whose memory it holds
		 * (/proc/PID/mem: a tree's fork children join it). */
		snprintf(p, sizeof(p), "/proc/%s/fd", e->d_name);
		DIR *fdd = opendir(p);
		struct dirent *f;
		int holds = 0;
		pid_t live = target > 0 && attach_alive(target) ? target : 0;
		while (fdd && (f = readdir(fdd))) {
			struct stat st;
			char fp[600], ln[64];
			snprintf(fp, sizeof(fp), "%s/%s", p, f->d_name);
			if (f->d_name[0] == '.')
				continue;
			if (!holds && stat(fp, &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino)
				holds = 1;
			ssize_t ll = live ? -1 : readlink(fp, ln, sizeof(ln) - 1);
			int mp;
			if (ll > 0 && (ln[ll] = 0, sscanf(ln, "/proc/%d/mem", &mp) == 1) && mp > 0 && attach_alive((pid_t)mp))
				live = (pid_t)mp;
		}
		if (fdd)
			closedir(fdd);
		if (holds && target > 0 && (live != 0) == alive)
			pids[n++] = live ? live : target;
	}
	closedir(d);
	return n;
}

int agent_helpers_writing(const char *path, pid_t *pids, int max)
{
	return helpers_holding(path, pids, max, 1);
}

int agent_helpers_finishing(const char *path)
{
	pid_t one[1];
	return helpers_holding(path, one, 1, 0);
}

/* The process's command line, for the session record. */
static int target_argv(pid_t pid, char *buf, size_t n, char **argv, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t len = fd >= 0 ? read(fd, buf, n - 1) : -1;
	if (fd >= 0)
		close(fd);
	int argc = 0;
	if (len > 0) {
		buf[len] = 0;
		for (ssize_t i = 0; i < len && argc < max; i += (ssize_t)strlen(buf + i) + 1)
			argv[argc++] = buf + i;
	}
	return argc;
}

int attach_ensure_agent(pid_t pid, int quiet, const char *options, char *err, size_t errlen)
{
	char sock[108];
	if (ctl_find(pid, sock, sizeof(sock), err, errlen) == 0)
		return 0;
	if (!attach_alive(pid) || strstr(err, "permission denied"))
		return -1;
	/* Root may load it, but the agent answers only its own user: a
	 * load that could not be used is not made. */
	char path[64];
	struct stat sb;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &sb) == 0 && sb.st_uid != geteuid()) {
		snprintf(err, errlen,
			 "process %d belongs to uid %u, and its agent would answer only that user: run strata as that user "
			 "(sudo -u '#%u' strata ...)", (int)pid, (unsigned)sb.st_uid, (unsigned)sb.st_uid);
		return -1;
	}
	struct inject_stats st;
	if (inject_agent(pid, agent_dir(), options, 3000, &st, err, errlen))
		return -1;
	/* The agent's helper opens the control channel as it starts. */
	for (int i = 0; i < 250; i++) {
		if (ctl_find(pid, sock, sizeof(sock), err, errlen) == 0) {
			if (quiet)
				;
			else if (st.how == INJECT_PEP768)
				fprintf(stderr,
					"strata: loaded the agent into process %d through the interpreter's remote debugging "
					"hook (PEP 768, as sys.remote_exec), in %.1f ms\n",
					(int)pid, st.wait_ms);
			else
				fprintf(stderr,
					"strata: loaded the agent into process %d (thread %d borrowed for %.1f ms, after "
					"%.1f ms waiting for a safe point)%s%s\n",
					(int)pid, (int)st.tid, st.call_ms, st.wait_ms,
					st.not_pep768[0] ? "; not through PEP 768: " : "", st.not_pep768);
			return 0;
		}
		if (!attach_alive(pid))
			break;
		usleep(20000);
	}
	snprintf(err, errlen,
		 "the agent was loaded into process %d but its control channel did not appear (is STRATA_NO_CONTROL "
		 "set in its environment?)", (int)pid);
	return -1;
}

/* The agent's settings, as the options that would give them. */
static void describe(const char *reply, char *out, size_t n)
{
	char v[512], ev[512];
	int w = snprintf(out, n, "--mode %s", ctl_value(reply, "mode", v, sizeof(v)));
	if (ctl_value(reply, "events", ev, sizeof(ev))[0] && w > 0 && (size_t)w < n)
		w += snprintf(out + w, n - (size_t)w, " -e %s", ev);
	if (atoi(ctl_value(reply, "native", v, sizeof(v))) && w > 0 && (size_t)w < n)
		w += snprintf(out + w, n - (size_t)w, " --native");
	if (atoi(ctl_value(reply, "perfmap", v, sizeof(v))) && w > 0 && (size_t)w < n)
		w += snprintf(out + w, n - (size_t)w, " --perf-map");
	unsigned d = (unsigned)strtoul(ctl_value(reply, "depth", v, sizeof(v)), NULL, 10);
	if (d && d != 512 && w > 0 && (size_t)w < n)
		w += snprintf(out + w, n - (size_t)w, " --max-depth %u", d);
	unsigned long long ob = strtoull(ctl_value(reply, "objects", v, sizeof(v)), NULL, 10);
	if (ob && w > 0 && (size_t)w < n)
		snprintf(out + w, n - (size_t)w, " --objects-rate %llu", ob);
}

/* Whether the running agent (its status reply) samples as asked. */
void attach_want_from(struct attach_want *w, const struct launch_opts *o, int fixed, char *opts, size_t n)
{
	launch_agent_options(o, opts, n);
	*w = (struct attach_want){
		.options = opts,
		.fixed = fixed,
		.mode = o->mode,
		.native = o->native,
		.perf_map = o->perf_map,
		.max_depth = o->max_depth,
		.events = o->events,
		.jit_lines = o->jit_lines,
		.objects = o->objects_rate,
	};
}

static int check_want(pid_t pid, const char *reply, const struct attach_want *want, char *err, size_t errlen)
{
	char v[512], have[600];
	if (want->fixed) {
		const char *ev = want->events ? want->events : "";
		int same = !strcmp(ctl_value(reply, "mode", v, sizeof(v)), want->mode == MODE_WALL ? "wall" : "cpu") &&
			   atoi(ctl_value(reply, "native", v, sizeof(v))) == !!want->native &&
			   atoi(ctl_value(reply, "perfmap", v, sizeof(v))) == !!want->perf_map &&
			   strtoul(ctl_value(reply, "depth", v, sizeof(v)), NULL, 10) == want->max_depth &&
			   !strcmp(ctl_value(reply, "events", v, sizeof(v)), ev) &&
			   strtoull(ctl_value(reply, "objects", v, sizeof(v)), NULL, 10) == want->objects;
		if (!same) {
			describe(reply, have, sizeof(have));
			snprintf(err, errlen,
				 "process %d's agent samples with %s, fixed when it was loaded (or the process started) for "
				 "the life of the process: attach with those options, or with none to take them",
				 (int)pid, have);
			return -1;
		}
	}
	if (want->jit_lines && !atoi(ctl_value(reply, "jitlines", v, sizeof(v)))) {
		snprintf(err, errlen,
			 "--jit-lines: process %d was not started with NUMBA_DEBUGINFO=1, so Numba compiles its code without "
			 "line tables (it reads the setting when it compiles); start it with NUMBA_DEBUGINFO=1 to attach with "
			 "--jit-lines", (int)pid);
		return -1;
	}
	return 0;
}

/* Whether NUMBA_DEBUGINFO is set (not 0) in the environment process pid
 * started with: 1, 0, or -1 if it cannot be read. */
static int started_with_debuginfo(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	static char env[1 << 16];
	size_t n = fread(env, 1, sizeof(env) - 1, f);
	fclose(f);
	env[n] = 0;
	for (size_t i = 0; i < n; i += strlen(env + i) + 1)
		if (!strncmp(env + i, "NUMBA_DEBUGINFO=", 16))
			return atoi(env + i + 16) > 0;
	return 0;
}

int attach_start(struct attach *a, pid_t pid, const char *path, unsigned rate, int paused, int borrow,
		 const struct attach_want *want, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	a->pid = pid;
	char reply[CTL_MSG_MAX], v[4096];
	/* Refused before anything is loaded, where the environment says so
	 * (the agent, once there, says what the program's own is). */
	if (want && want->jit_lines && attach_alive(pid) && started_with_debuginfo(pid) == 0 &&
	    ctl_find(pid, v, sizeof(v), err, errlen) != 0) {
		check_want(pid, "ok\njitlines=0\n", &(struct attach_want){ .jit_lines = 1 }, err, errlen);
		return -1;
	}
	if (attach_ensure_agent(pid, 0, want ? want->options : NULL, err, errlen))
		return -1;
	if (ctl_call(pid, "status", -1, reply, sizeof(reply), 5000, err, errlen))
		return -1;
	if (want && check_want(pid, reply, want, err, errlen))
		return -1;
	char sock[108], e2[256];
	if (ctl_find(pid, sock, sizeof(sock), e2, sizeof(e2)) == 0 && strrchr(sock, '/'))
		snprintf(a->ctl_dir, sizeof(a->ctl_dir), "%.*s", (int)(strrchr(sock, '/') - sock), sock);
	ctl_value(reply, "python", a->python, sizeof(a->python));
	ctl_value(reply, "mode", a->mode, sizeof(a->mode));
	a->rate = (unsigned)strtoul(ctl_value(reply, "rate", v, sizeof(v)), NULL, 10);
	ctl_value(reply, "output", v, sizeof(v));
	if (v[0]) {
		if (!borrow || v[0] != '/') {
			snprintf(err, errlen,
				 "process %d is already being recorded to %s; 'strata ctl %d dump FILE' copies what it has",
				 (int)pid, v, (int)pid);
			return -1;
		}
		/* Someone records it already (strata record): read that. */
		snprintf(a->output, sizeof(a->output), "%s", v);
		a->borrowed_sampling = !strcmp(ctl_value(reply, "sampling", v, sizeof(v)), "on");
		if (!paused && !a->borrowed_sampling && attach_sampling(a, 1, err, errlen))
			return -1;
		return 0;
	}

	static char cmd[16384];
	char *argv[256];
	int argc = target_argv(pid, cmd, sizeof(cmd), argv, 256);
	static char events[512];
	ctl_value(reply, "events", events, sizeof(events));
	if (rate && events[0]) {
		snprintf(err, errlen, "process %d samples on events (%s): its period is fixed, -F does not apply",
			 (int)pid, events);
		return -1;
	}
	struct launch_opts o = {
		.output = path,
		.mode = !strcmp(a->mode, "wall") ? MODE_WALL : MODE_CPU,
		.rate_hz = rate ? rate : a->rate,
		.events = events[0] ? events : NULL,
		.argv = argv,
		.argc = argc,
	};
	if (profile_create(&o, &a->l, err, errlen))
		return -1;
	snprintf(a->output, sizeof(a->output), "%s", a->l.output_abs);
	int fd = open(a->l.output_abs, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	char req[5200];
	int w = snprintf(req, sizeof(req), "attach\npath=%s\npaused=%d\n%s", a->l.output_abs, paused,
			 want && want->send ? want->send : "");
	if (rate)
		snprintf(req + w, sizeof(req) - (size_t)w, "rate=%u\n", rate);
	int rc = ctl_call(pid, req, fd, reply, sizeof(reply), 10000, err, errlen);
	close(fd);
	if (rc)
		return -1;
	if (rate)
		a->rate = rate;
	a->ours = 1;
	return 0;
}

int attach_sampling(struct attach *a, int on, char *err, size_t errlen)
{
	char reply[CTL_MSG_MAX];
	return ctl_call(a->pid, on ? "start" : "stop", -1, reply, sizeof(reply), 5000, err, errlen) ? -1 : 0;
}

/* Processes forked by the target after the attach record into the same
 * file (their agent inherited the output, as the children of a program
 * started by strata record do): they are detached with it. Their control
 * sockets are beside the target's (the same environment). Returns how
 * many were found. */
static int detach_children(struct attach *a)
{
	DIR *d = a->ctl_dir[0] ? opendir(a->ctl_dir) : NULL;
	if (!d)
		return 0;
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || pid == a->pid || strcmp(end, ".sock") != 0 || !attach_alive((pid_t)pid))
			continue;
		char reply[CTL_MSG_MAX], out[4096], err[512];
		if (ctl_call((pid_t)pid, "status", -1, reply, sizeof(reply), 2000, err, sizeof(err)) ||
		    strcmp(ctl_value(reply, "output", out, sizeof(out)), a->output) != 0)
			continue;
		found++;
		ctl_call((pid_t)pid, "detach", -1, reply, sizeof(reply), 10000, err, sizeof(err));
	}
	closedir(d);
	return found;
}

int attach_end(struct attach *a, char *err, size_t errlen)
{
	char reply[CTL_MSG_MAX];
	int rc = 0;
	if (attach_alive(a->pid)) {
		if (a->ours)
			rc = ctl_call(a->pid, "detach", -1, reply, sizeof(reply), 10000, err, errlen);
		else
			rc = attach_sampling(a, a->borrowed_sampling, err, errlen);
		/* It may have died between the check and the call. */
		if (rc && !attach_alive(a->pid))
			rc = 0;
	}
	if (a->ours) {
		/* Once more for a child whose helper was still starting. */
		detach_children(a);
		usleep(50000);
		detach_children(a);
	}
	if (a->ours && profile_finish(&a->l, 0) && !rc) {
		snprintf(err, errlen, "could not append the end of the session to %s", a->output);
		rc = -1;
	}
	a->ours = 0;
	return rc ? -1 : 0;
}

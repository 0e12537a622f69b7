/*
 * ptstop.c — see ptstop.h.
 */
#include "ptstop.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>

/* How long more a runnable thread that has not stopped is waited for. */
#define STARVED_MS 10000

uint64_t ptstop_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* waitpid bounded by a one-shot timer: its signal (with no SA_RESTART)
 * makes a blocked waitpid return EINTR. */
static void on_alarm(int sig) { (void)sig; }

static void arm(int ms)
{
	static int installed;
	if (!installed) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, NULL);
		installed = 1;
	}
	struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

static void disarm(void)
{
	struct itimerval it = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &it, NULL);
}

int ptstop_wait(struct ptthread *t, int timeout_ms, int *status)
{
	arm(timeout_ms > 0 ? timeout_ms : 1);
	pid_t r = waitpid(t->tid, status, __WALL);
	int e = errno;
	disarm();
	if (r == t->tid)
		return 0;
	if (r < 0 && e == ECHILD)
		t->gone = 1;
	return -1;
}

struct ptthread *ptstop_find(struct ptstop *s, pid_t tid)
{
	for (int i = 0; i < s->n; i++)
		if (s->t[i].tid == tid)
			return &s->t[i];
	return NULL;
}

/* Whether thread tid of pid is runnable (state R: running, or waiting
 * for a CPU), as /proc says. */
static int runnable(pid_t pid, pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* after the command name, which may hold anything */
	return p && p[1] == ' ' && p[2] == 'R';
}

/* Takes one stop report of t: 1 if t is now held, 0 if it is gone. */
static int take_stop(struct ptthread *t, int st)
{
	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		t->gone = 1;
		t->stopped = 0;
		return 0;
	}
	if (!WIFSTOPPED(st))
		return 0;
	t->stopped = 1;
	int sig = WSTOPSIG(st);
	if ((st >> 16) == PTRACE_EVENT_STOP) {
		/* Our interrupt (SIGTRAP), or job control. */
		t->group_stop = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
	} else if (sig != SIGTRAP || (st >> 16) == 0) {
		/* A signal on its way to the thread: ours to give back. */
		t->pending_sig = sig;
	}
	return 1;
}

static int add(struct ptstop *s, pid_t tid)
{
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 16;
		struct ptthread *nt = realloc(s->t, (size_t)cap * sizeof(*nt));
		if (!nt)
			return -1;
		s->t = nt;
		s->cap = cap;
	}
	memset(&s->t[s->n], 0, sizeof(s->t[s->n]));
	s->t[s->n].tid = tid;
	s->n++;
	return 0;
}

/* Seizes and interrupts the threads not seen yet; the number of new ones,
 * or -1 if /proc/PID/task is gone. */
static int seize_new(struct ptstop *s, int *first_err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *e;
	int added = 0;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
		if (tid <= 0 || ptstop_find(s, tid))
			continue;
		if (add(s, tid))
			break;
		struct ptthread *t = &s->t[s->n - 1];
		added++;
		if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) {
			if (errno == ESRCH)
				t->gone = 1;
			else if (!*first_err)
				*first_err = errno;
			continue;
		}
		t->seized = 1;
		if (!s->stop_ns)
			s->stop_ns = ptstop_now_ns();
		if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0 && errno == ESRCH)
			t->gone = 1;
	}
	closedir(d);
	return added;
}

int ptstop_all(struct ptstop *s, pid_t pid, int timeout_ms, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->pid = pid;
	int first_err = 0;
	for (int round = 0; round < 100; round++) {
		int added = seize_new(s, &first_err);
		if (added < 0) {
			snprintf(err, errlen, "process %d has exited", (int)pid);
			ptstop_release(s);
			return -1;
		}
		if (first_err) {
			snprintf(err, errlen, "cannot pause process %d: ptrace: %s%s", (int)pid, strerror(first_err),
				 first_err == EPERM ? " (is another debugger or profiler tracing it?)" : "");
			ptstop_release(s);
			return -1;
		}
		if (!added && round > 0)
			break;
		for (int i = 0; i < s->n; i++) {
			struct ptthread *t = &s->t[i];
			if (!t->seized || t->stopped || t->gone)
				continue;
			int st;
			if (ptstop_wait(t, timeout_ms, &st) == 0)
				take_stop(t, st);
			/* A thread that is runnable but has not stopped is
			 * waiting for a CPU (a loaded machine: 1.9 s was seen
			 * with two busy loops on two cores): it stops as soon
			 * as it runs. Only one in uninterruptible sleep (disk,
			 * NFS) is left running. */
			else if (!t->gone && runnable(pid, t->tid) && ptstop_wait(t, STARVED_MS, &st) == 0)
				take_stop(t, st);
		}
	}
	int any = 0;
	for (int i = 0; i < s->n; i++)
		any |= s->t[i].stopped;
	if (!any) {
		snprintf(err, errlen, "process %d could not be paused (it has exited, or is in uninterruptible sleep)",
			 (int)pid);
		ptstop_release(s);
		return -1;
	}
	return 0;
}

void ptstop_regs(struct ptstop *s)
{
	for (int i = 0; i < s->n; i++) {
		struct ptthread *t = &s->t[i];
		t->have_regs = t->stopped && ptrace(PTRACE_GETREGS, t->tid, 0, &t->regs) == 0;
	}
}

void ptstop_release_one(struct ptthread *t)
{
	if (!t->seized)
		return;
	if (!t->stopped && !t->gone) {
		/* Not stopped yet (our interrupt still on its way, or
		 * uninterruptible sleep): PTRACE_DETACH needs a stopped
		 * tracee, so wait for the stop our interrupt makes. */
		int st;
		if (ptstop_wait(t, 2000, &st) == 0)
			take_stop(t, st);
	}
	if (t->stopped)
		ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)t->pending_sig);
	t->seized = t->stopped = 0;
	t->pending_sig = 0;
}

void ptstop_release(struct ptstop *s)
{
	for (int i = 0; i < s->n; i++)
		ptstop_release_one(&s->t[i]);
	s->release_ns = ptstop_now_ns();
	free(s->t);
	s->t = NULL;
	s->n = s->cap = 0;
}

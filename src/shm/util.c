/*
 * util.c — small things both halves of the agent use: clocks, stream ids,
 * the sampling rate as the profile states it, where a descriptor of ours
 * goes in the profiled process.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "common/format.h"

uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t agent_new_stream_id(void)
{
	uint64_t id = 0;
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = mono_ns() ^ ((uint64_t)getpid() << 32);
	return id ? id : 1;
}

unsigned agent_rate_hz(void)
{
	if (agent.trigger != TRIGGER_PERF_EVENT)
		return agent.cfg.rate_hz;
	/* Only a clock event has a rate; others sample every N occurrences. */
	const struct event_list *ev = &agent.cfg.events;
	uint64_t p = ev->n && (ev->ev[0].flags & EVS_CLOCK) ? agent.cfg.event_period : 0;
	return p ? (unsigned)(1000000000ull / p) : 0;
}

/* The soft RLIMIT_NOFILE (what open() is held to), capped at INT_MAX. */
static long nofile_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1024;
	return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX ? INT_MAX : (long)rl.rlim_cur;
}

void agent_note(uint32_t kind, uint32_t tid, const char *fmt, ...)
{
	char text[sizeof(agent.notes.e[0].text)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	agent_log("process %d: %s", (int)agent.pid, text);
	uint32_t i = atomic_fetch_add(&agent.notes.next, 1);
	if (i >= NOTES_MAX)
		return;
	struct agent_note *n = &agent.notes.e[i];
	atomic_store(&n->state, 1);
	n->kind = kind;
	n->tid = tid;
	n->time_ns = mono_ns();
	memcpy(n->text, text, sizeof(text));
	atomic_store(&n->state, 2);
}

int fd_high(int fd)
{
	if (fd < 0)
		return fd;
	int e = errno;
	long lim = nofile_limit();
	/* Where a program leaves room (the usual limit of 1024 and up),
	 * above 511, as before: out of the numbers programs dup2 onto or
	 * close in a loop. Under a lower limit, as close to its top as a
	 * number is free: F_DUPFD gives the lowest free one from its
	 * argument up, so trying from the top down, halving the distance,
	 * finds a high one in a few calls. A number the program already
	 * passed over (at or above half the limit) stays. */
	long floor = lim >= 1024 ? 512 : lim / 2;
	if (fd >= floor) {
		errno = e;
		return fd;
	}
	int hi = -1;
	if (lim >= 1024)
		hi = fcntl(fd, F_DUPFD_CLOEXEC, 512);
	else
		for (long d = 1; hi < 0 && lim - d >= floor; d *= 2)
			hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)(lim - d));
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	errno = e;
	return fd;
}

int fd_limit_note(char *buf, size_t n, int err)
{
	if (err != EMFILE || !n) {
		if (n)
			buf[0] = 0;
		return 0;
	}
	return snprintf(buf, n, ": RLIMIT_NOFILE is %ld", nofile_limit());
}

void agent_note_unsupported(const char *output, pid_t pid, pid_t ppid, const char *version, const char *exe,
			    int refused)
{
	agent_note_unprofiled(output, pid, ppid, version, exe, PROC_UNSUPPORTED | (refused ? PROC_REFUSED : 0), NULL);
}

void agent_note_unprofiled(const char *output, pid_t pid, pid_t ppid, const char *version, const char *exe,
			   uint32_t flags, const char *why)
{
	int fd = open(output, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return;
	char *argv[1] = { (char *)exe };
	struct rec_process p = {
		.pid = (uint32_t)pid,
		.ppid = (uint32_t)ppid,
		.start_mono_ns = mono_ns(),
		.python_version = (char *)version,
		.executable = (char *)exe,
		.argc = 1,
		.argv = argv,
		.flags = flags,
	};
	struct wbuf recs, chunk;
	wbuf_init(&recs);
	wbuf_init(&chunk);
	rec_put_process(&recs, &p);
	if (why) {
		struct rec_note note = { .time_ns = mono_ns(), .kind = NOTE_NOT_PROFILED, .text = (char *)why };
		rec_put_note(&recs, &note);
	}
	struct rec_process_end e = { .end_mono_ns = mono_ns(), .reason = END_EXIT };
	rec_put_process_end(&recs, &e);
	if (!recs.oom && chunk_seal_stored(&chunk, recs.data, recs.len, agent_new_stream_id(), 0, CHUNK_LAST) == 0) {
		ssize_t w = write(fd, chunk.data, chunk.len);
		(void)w;
	}
	wbuf_free(&recs);
	wbuf_free(&chunk);
	close(fd);
}

int lock_bounded(pthread_mutex_t *m, _Atomic int *stalled)
{
	long long ns = atomic_load(stalled) ? REG_STALLED_WAIT_NS : REG_WAIT_NS;
	int rc = pthread_mutex_trylock(m);
	if (rc == EBUSY) {
		uint64_t end = mono_ns() + (uint64_t)ns;
		struct timespec t = { (time_t)(end / 1000000000u), (long)(end % 1000000000u) };
		do
			rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &t);
		while (rc == EINTR);
	}
	if (rc == EOWNERDEAD) {
		/* The holder died: its edits are single stores each. */
		pthread_mutex_consistent(m);
		rc = 0;
	}
	if (rc == 0)
		atomic_store(stalled, 0);
	else if (rc == ETIMEDOUT)
		atomic_store(stalled, 1);
	return rc ? -1 : 0;
}

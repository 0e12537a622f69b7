/*
 * util.c — small things both halves of the agent use: clocks, stream ids,
 * the sampling rate as the profile states it.
 */
#include <fcntl.h>
#include <sys/random.h>
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

void agent_note_unsupported(const char *output, pid_t pid, pid_t ppid, const char *version, const char *exe,
			    int refused)
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
		.flags = PROC_UNSUPPORTED | (refused ? PROC_REFUSED : 0),
	};
	struct wbuf recs, chunk;
	wbuf_init(&recs);
	wbuf_init(&chunk);
	rec_put_process(&recs, &p);
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

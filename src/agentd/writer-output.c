/*
 * writer-output.c — the writer's output; see writer.h.
 *
 * In strata-agentd: the file the writer appends compressed chunks to (and
 * its checks that the descriptor is still ours), the file header and
 * session of an output the agent was asked to create, and output control
 * for control.c (attach, detach, dump, flush, what the target's children
 * inherit), and the window cuts of continuous profiling (send.c holds the
 * window files; each sealed chunk goes to both). Apart from writer.c,
 * whose pass loop fills the chunks: what happens to the output is
 * independent of how records are made.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/agent.h"
#include "agentd.h"
#include "common/format.h"
#include "common/snapshot.h"
#include "writer.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "dev"
#endif

/* ---- chunks ---------------------------------------------------------------- */

int open_output(void)
{
	if (!agent.cfg.output[0]) {
		errno = EBADF;
		return -1; /* an attached descriptor without a path: cannot reopen */
	}
	int fd = open(agent.cfg.output, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* Keep our descriptor out of the low numbers a program may dup2
	 * onto or close in a loop. */
	int hi = fcntl(fd, F_DUPFD_CLOEXEC, 512);
	if (hi >= 0) {
		close(fd);
		fd = hi;
	}
	struct stat st;
	if (fstat(fd, &st)) {
		close(fd);
		return -1;
	}
	W.fd = fd;
	W.dev = st.st_dev;
	W.ino = st.st_ino;
	return 0;
}

/* The program may have closed our descriptor and reused its number; never
 * write into someone else's file. */
static int output_ok(void)
{
	struct stat st;
	if (W.fd >= 0 && fstat(W.fd, &st) == 0 && st.st_dev == W.dev && st.st_ino == W.ino)
		return 1;
	W.fd = -1;
	return open_output() == 0;
}

int writer_has_file(void) { return W.fd >= 0 || agent.cfg.output[0]; }

void flush_chunk(uint16_t flags)
{
	if (W.failed || W.recs.len == 0 || W.recs.oom) {
		wbuf_reset(&W.recs);
		return;
	}
	wbuf_reset(&W.chunk);
	if (chunk_seal(&W.chunk, W.recs.data, W.recs.len, agent.stream, W.seq, flags, 3)) {
		wbuf_reset(&W.recs);
		return;
	}
	/* Sending: the same chunk goes to the window (send.c). */
	send_window_chunk(W.chunk.data, W.chunk.len);
	if (!writer_has_file()) {
		W.seq++;
		wbuf_reset(&W.recs);
		W.last_flush = mono_ns();
		return;
	}
	if (!output_ok()) {
		W.failed = 1;
		agent_log("cannot write the profile to %s: %s; profiling of this process stops", agent.cfg.output,
			  strerror(errno));
		atomic_store(&agent.sampling, 0);
		return;
	}
	size_t off = 0;
	while (off < W.chunk.len) {
		ssize_t n = write(W.fd, W.chunk.data + off, W.chunk.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			W.failed = 1;
			agent_log("writing the profile to %s failed: %s; profiling of this process stops",
				  agent.cfg.output, n < 0 ? strerror(errno) : "short write");
			atomic_store(&agent.sampling, 0);
			break;
		}
		off += (size_t)n;
	}
	W.seq++;
	wbuf_reset(&W.recs);
	W.last_flush = mono_ns();
}

/* ---- session ------------------------------------------------------------- */

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writes one chunk of the session stream we own straight to the output. */
static int put_session_chunk(struct wbuf *recs, uint32_t seq, uint16_t flags)
{
	struct wbuf chunk;
	wbuf_init(&chunk);
	int rc = -1;
	if (!recs->oom && chunk_seal(&chunk, recs->data, recs->len, W.session_stream, seq, flags, 3) == 0) {
		size_t off = 0;
		rc = 0;
		while (off < chunk.len) {
			ssize_t n = write(W.fd, chunk.data + off, chunk.len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				rc = -1;
				break;
			}
			off += (size_t)n;
		}
	}
	wbuf_free(&chunk);
	return rc;
}

void put_session(struct wbuf *recs, uint64_t realtime, uint64_t mono)
{
	char *argv[256];
	char cmd[16384];
	uint32_t argc = read_cmdline(cmd, sizeof(cmd), argv, 256);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	struct rec_session se = {
		.strata_version = STRATA_VERSION,
		.start_realtime_ns = realtime,
		.start_mono_ns = mono,
		.argc = argc,
		.argv = argv,
		.mode = (uint32_t)agent.cfg.mode,
		.rate_hz = agent_rate_hz(),
		.hostname = host,
	};
	/* The model takes the event columns from the session. */
	char *names[EVENTS_MAX];
	if (agent.trigger == TRIGGER_PERF_EVENT) {
		for (uint32_t i = 0; i < agent.cfg.events.n; i++)
			names[i] = (char *)agent.cfg.events.ev[i].name;
		se.nevents = agent.cfg.events.n;
		se.events = names;
	}
	rec_put_session(recs, &se);
}

/* The header and session of an output the agent was asked to create:
 * what `strata record` writes before it starts a command. */
static int write_session_start(void)
{
	struct file_header fh = { .major = STRATA_FMT_MAJOR, .minor = STRATA_FMT_MINOR, .created_ns = realtime_ns() };
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	file_header_pack(hdr, &fh);
	if (write(W.fd, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		return -1;
	struct wbuf recs;
	wbuf_init(&recs);
	put_session(&recs, fh.created_ns, mono_ns());
	int rc = put_session_chunk(&recs, 0, 0);
	wbuf_free(&recs);
	return rc;
}

/* ---- windows (continuous profiling, send.c) --------------------------------- */

/* Ends the stream where it is, in every sink: its last record, the
 * chunk. Caller holds W.lock, rings drained. */
static void segment_end(void)
{
	if (W.any_samples || W.attached) {
		struct rec_process_end e = { .end_mono_ns = mono_ns(), .reason = END_DETACH, .samples = W.samples,
					     .dropped = W.dropped };
		rec_put_process_end(&W.recs, &e);
		flush_chunk(CHUNK_LAST);
	}
	wbuf_reset(&W.recs);
}

/* The next stream: this process again, carrying on (one process to a
 * reader of the file), its threads, code, objects and JIT images written
 * again, so that a window read alone is complete. */
static void segment_begin(void)
{
	agent.stream = agent_new_stream_id();
	state_reset();
	reg_lock();
	for (struct tslot *s = agent.slots; s; s = s->next)
		s->announced = 0;
	reg_unlock();
	send_window_open();
	put_process(agent.stream_flags | PROC_CONTINUED);
}

void writer_window_cut(void)
{
	if (!W.any_samples && W.seq == 0) {
		/* Nothing of this stream is out yet (its first records wait
		 * in W.recs): only the window file starts over. */
		send_window_close(0);
		send_window_open();
		return;
	}
	segment_end();
	send_window_close(W.any_samples);
	segment_begin();
}

void writer_send_begin(void)
{
	pthread_mutex_lock(&W.lock);
	send_arm(1);
	drain_all();
	if (writer_has_output()) {
		/* The file's stream starts over, so the window has all. */
		segment_end();
		segment_begin();
	} else {
		atomic_store(&agent.has_output, 1);
		state_reset();
		send_window_open();
		put_process(agent.stream_flags);
	}
	pthread_mutex_unlock(&W.lock);
	writer_poke();
}

void writer_send_end(void)
{
	pthread_mutex_lock(&W.lock);
	drain_all();
	segment_end();
	send_window_close(W.any_samples);
	send_arm(0);
	if (writer_has_file()) {
		segment_begin(); /* no window is open: the file's alone */
	} else {
		atomic_store(&agent.has_output, 0);
		state_reset();
	}
	pthread_mutex_unlock(&W.lock);
}

void write_session_end(void)
{
	/* The process is still running when an attach ends: status 0. */
	struct rec_session_end e = { .end_mono_ns = mono_ns(), .status = 0 };
	struct wbuf recs;
	wbuf_init(&recs);
	rec_put_session_end(&recs, &e);
	put_session_chunk(&recs, 1, CHUNK_LAST);
	wbuf_free(&recs);
	W.own_session = 0;
}

/* ---- output control (control.c) ----------------------------------------- */

/* What the target's children inherit once the output changed: written
 * into the buffer not in use, then published, so an exec in the target
 * (or a vfork child) reads a whole string (process.c). */
static void env_set_output(const char *path)
{
	int which = atomic_load(&agent.outvar.which) == 1 ? 2 : 1;
	char *b = agent.outvar.buf[which - 1];
	if (path && *path)
		snprintf(b, sizeof(agent.outvar.buf[0]), "STRATA_OUTPUT=%s", path);
	else
		snprintf(b, sizeof(agent.outvar.buf[0]), "STRATA_AGENT=1");
	atomic_store(&agent.outvar.which, which);
}

int writer_output(char *buf, size_t n)
{
	pthread_mutex_lock(&W.lock);
	int has = writer_has_output() && writer_has_file();
	snprintf(buf, n, "%s", has ? agent.cfg.output : "");
	pthread_mutex_unlock(&W.lock);
	return has;
}

int writer_attach(int fd, const char *path, int create_session, char *err, size_t errlen)
{
	if (fd < 0) {
		snprintf(err, errlen, "attach needs the output's descriptor");
		return -1;
	}
	struct stat st;
	int fl = fcntl(fd, F_GETFL);
	if (fstat(fd, &st) || fl < 0) {
		snprintf(err, errlen, "bad output descriptor: %s", strerror(errno));
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "the output is not a regular file");
		return -1;
	}
	if ((fl & O_ACCMODE) == O_RDONLY) {
		snprintf(err, errlen, "the output is not open for writing");
		return -1;
	}
	if (create_session && st.st_size != 0) {
		snprintf(err, errlen, "the output is not empty");
		return -1;
	}
	pthread_mutex_lock(&W.lock);
	if (writer_has_file()) {
		snprintf(err, errlen, "busy: already recording to %s", agent.cfg.output[0] ? agent.cfg.output : "a descriptor");
		pthread_mutex_unlock(&W.lock);
		return -1;
	}
	/* Whatever the rings hold predates this attach: drop it (or, while
	 * sending, it ends the window). */
	drain_all();
	if (send_active()) {
		segment_end();
		send_window_close(W.any_samples);
	}
	/* Our own copy, out of the low numbers a program may dup2 onto. */
	int ofd = fcntl(fd, F_DUPFD_CLOEXEC, 512);
	if (ofd < 0)
		ofd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (ofd < 0) {
		snprintf(err, errlen, "cannot keep the output: %s", strerror(errno));
		pthread_mutex_unlock(&W.lock);
		return -1;
	}
	/* Every writer appends whole chunks (forked children share it). */
	fcntl(ofd, F_SETFL, fl | O_APPEND);
	W.fd = ofd;
	W.dev = st.st_dev;
	W.ino = st.st_ino;
	snprintf(agent.cfg.output, sizeof(agent.cfg.output), "%s", path && *path ? path : "");
	if (create_session) {
		W.session_stream = agent_new_stream_id();
		if (write_session_start()) {
			snprintf(err, errlen, "cannot write the output: %s", strerror(errno));
			close(W.fd);
			W.fd = -1;
			agent.cfg.output[0] = 0;
			pthread_mutex_unlock(&W.lock);
			return -1;
		}
		W.own_session = 1;
	}
	/* A new stream: this process as of now. */
	agent.stream = agent_new_stream_id();
	agent.stream_flags &= ~(uint32_t)PROC_CONTINUED;
	agent.start_ns = mono_ns();
	state_reset();
	reg_lock();
	for (struct tslot *s = agent.slots; s; s = s->next) {
		s->announced = 0;
		s->reported_dropped = atomic_load(&s->dropped);
	}
	reg_unlock();
	atomic_store(&agent.has_output, 1);
	W.attached = 1;
	send_window_open();
	put_process(agent.stream_flags);
	pthread_mutex_unlock(&W.lock);
	env_set_output(agent.cfg.output);
	return 0;
}

int writer_detach(char *err, size_t errlen)
{
	pthread_mutex_lock(&W.lock);
	if (!writer_has_output()) {
		snprintf(err, errlen, "not recording: there is no output to detach");
		pthread_mutex_unlock(&W.lock);
		return -1;
	}
	drain_all();
	finish_stream(END_DETACH);
	send_window_close(W.any_samples);
	W.attached = 0;
	if (W.fd >= 0)
		close(W.fd);
	W.fd = -1;
	W.failed = 0;
	agent.cfg.output[0] = 0;
	if (send_active() && !send_ends_with_detach()) {
		/* Sending goes on, in a stream of its own. */
		segment_begin();
	} else {
		/* Sending that came with the attach ends here, with the file's
		 * stream and under the same lock: the last window holds what
		 * the file holds, not a sample drained in between (send_stop
		 * then only lets go of the directory). */
		if (send_active())
			send_arm(0);
		atomic_store(&agent.has_output, 0);
		state_reset();
	}
	pthread_mutex_unlock(&W.lock);
	env_set_output(NULL);
	return 0;
}

void writer_flush_now(void)
{
	pthread_mutex_lock(&W.lock);
	drain_all();
	if (writer_has_output() && W.any_samples && W.recs.len)
		flush_chunk(0);
	pthread_mutex_unlock(&W.lock);
}

int64_t writer_dump(int dst, char *err, size_t errlen)
{
	pthread_mutex_lock(&W.lock);
	if (!writer_has_output() || W.fd < 0) {
		snprintf(err, errlen, "nothing recorded: the agent has no output (attach one with strata record --pid)");
		pthread_mutex_unlock(&W.lock);
		return -1;
	}
	drain_all();
	/* Everything so far goes to the file first, even a stream that has
	 * no sample yet, so the copy shows this process. */
	if (W.recs.len)
		flush_chunk(0);
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", W.fd);
	int in = open(p, O_RDONLY | O_CLOEXEC);
	struct stat st;
	int ok = in >= 0 && fstat(in, &st) == 0;
	int e = errno;
	pthread_mutex_unlock(&W.lock);
	if (!ok) {
		snprintf(err, errlen, "cannot read the output: %s", strerror(e));
		if (in >= 0)
			close(in);
		return -1;
	}
	/* The copy runs without the lock: the writer keeps draining. */
	int64_t n = snapshot_copy(in, (uint64_t)st.st_size, dst, mono_ns(), err, errlen);
	close(in);
	return n;
}

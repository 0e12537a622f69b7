/*
 * send.c — continuous profiling, the helper's side (docs/send.md): the
 * windows. While sending is on, every chunk the writer seals also goes
 * to the current window file in the spool directory (common/spool.h);
 * every agent.cfg.send_every_ms the writer ends the stream there and
 * begins the next one (writer-output.c, writer_window_cut), and the
 * window, a complete .strata file of this process alone, is published
 * for the sender. The helper never sends anything itself and never
 * waits for the sender: it only writes files, keeps at most send_queue
 * of its own windows unsent (the oldest goes, counted as dropped), and
 * starts a sender (`strata send --spool DIR`, built from the CLI's
 * libraries: the model, the symbolizer, the encoders, libcurl) when the
 * directory has none.
 *
 * Where the directory comes from:
 *   - `strata record --send` makes it and its sender, and names it in
 *     STRATA_OPTIONS (send=DIR): every process of the command joins it;
 *   - STRATA_SEND=URL in the program's environment (a service started
 *     with the agent in standby): the helper makes one, writes the
 *     STRATA_SEND* variables it was given into its config, and starts
 *     the sender;
 *   - `strata ctl PID send URL` (and `record --pid --send`): the CLI
 *     makes it, the `send` command (or `attach` with send=) names it.
 * A fork child inherits agent.cfg.send_dir and sends through the same
 * sender. Everything here runs in the writer thread (W.lock held) or
 * in the control thread under the same lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/agent.h"
#include "agentd.h"
#include "common/ctlproto.h"
#include "common/format.h"
#include "common/spool.h"
#include "writer.h"
#include "target.h"

extern char **environ;

struct send_state {
	int on;
	int by_attach;          /* started by an attach: ends with its detach */
	char dir[512];
	int wfd;                /* our shared lock on writers.lock */
	int fd;                 /* the window being written, or -1 */
	char tmp[1024];
	uint64_t t_ns;          /* its start (CLOCK_REALTIME): its name */
	uint64_t start_mono;
	uint64_t session;
	int bad;                /* a write failed: the window is not published */
	uint64_t *queue;        /* our published windows, oldest first */
	unsigned nq;
	uint64_t windows, dropped, failed;
	pid_t sender;
	int warned;
};

static void send_state_init(struct send_state *s)
{
	s->wfd = s->fd = -1;
}

TARGET_STATE(struct send_state, send, send_state_init)
#define S (*send_of(agentd_target))

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int send_active(void) { return S.on; }
int send_ends_with_detach(void) { return S.on && S.by_attach; }

/* ---- the sender ------------------------------------------------------------ */

/* The strata CLI: $STRATA_CLI, else where `make install` and the build
 * tree put it beside the agent (<prefix>/lib/strata -> <prefix>/bin). */
static void cli_path(char *out, size_t n)
{
	const char *c = getenv("STRATA_CLI");
	if (c && *c)
		snprintf(out, n, "%s", c);
	else
		snprintf(out, n, "%s/../../bin/strata", agent.agent_dir);
}

static void reap(void)
{
	if (S.sender > 0 && waitpid(S.sender, NULL, WNOHANG) == S.sender)
		S.sender = 0;
}

/* Starts a sender for the directory unless one serves it. Its messages go
 * to the program's standard error (the service's log); it runs in a
 * session of its own, reniced by itself, and outlives us if it must
 * (the windows we left). */
static void ensure_sender(void)
{
	reap();
	if (spool_sender_alive(S.dir))
		return;
	char cli[4200], cfg[1024];
	cli_path(cli, sizeof(cli));
	snprintf(cfg, sizeof(cfg), "%s/%s", S.dir, SPOOL_CONFIG);
	if (access(cfg, R_OK))
		return; /* nobody said where to send (yet) */
	if (access(cli, X_OK)) {
		if (!S.warned++)
			agent_log("cannot start the sender of process %d's profile: %s: %s (set STRATA_CLI)", (int)agent.pid,
				  cli, strerror(errno));
		return;
	}
	char errpath[64];
	snprintf(errpath, sizeof(errpath), "/proc/%d/fd/2", (int)agent.pid);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (access(errpath, W_OK) == 0)
		posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_APPEND, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
	char *argv[] = { (char *)"strata", (char *)"send", (char *)"--spool", S.dir, NULL };
	pid_t pid;
	int rc = posix_spawn(&pid, cli, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc) {
		if (!S.warned++)
			agent_log("cannot start the sender %s: %s", cli, strerror(rc));
		return;
	}
	S.sender = pid;
}

/* ---- turning it on and off ----------------------------------------------- */

static int join(const char *dir, unsigned every_ms, unsigned queue, char *err, size_t errlen)
{
	if (S.on || S.wfd >= 0) {
		snprintf(err, errlen, "already sending (strata ctl %d send stop first)", (int)agent.pid);
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		snprintf(err, errlen, "%s is not a private directory of this user", dir);
		return -1;
	}
	int wfd = spool_hold_writer(dir);
	if (wfd < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	uint64_t *q = calloc(queue ? queue : 1, sizeof(*q));
	if (!q) {
		close(wfd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	free(S.queue);
	S.queue = q;
	S.nq = 0;
	S.wfd = wfd;
	snprintf(S.dir, sizeof(S.dir), "%s", dir);
	snprintf(agent.cfg.send_dir, sizeof(agent.cfg.send_dir), "%s", dir);
	agent.cfg.send_every_ms = every_ms;
	agent.cfg.send_queue = queue ? queue : 1;
	ensure_sender();
	return 0;
}

/* Under W.lock (writer_send_begin, writer_send_end): the writer thread
 * cuts windows only while this says so. */
void send_arm(int on)
{
	S.start_mono = mono_ns();
	S.on = on;
}

/* The STRATA_SEND* variables we were started with, as the config of a
 * directory of our own. */
static int own_spool(char *dir, size_t n)
{
	char base[256];
	if (ctl_sock_dir(base, sizeof(base), getenv("XDG_RUNTIME_DIR"), geteuid()) || ctl_prepare_dir(base) ||
	    spool_make(dir, n, base, agent.pid))
		return -1;
	char cfg[1024];
	snprintf(cfg, sizeof(cfg), "%s/%s", dir, SPOOL_CONFIG);
	int fd = open(cfg, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (char **e = environ; *e; e++)
		if (!strncmp(*e, "STRATA_SEND", 11) && strchr(*e, '=') && !strchr(*e, '\n'))
			fprintf(f, "%s\n", *e);
	return fclose(f);
}

static unsigned env_uint(const char *name, unsigned def, unsigned lo, unsigned hi, unsigned scale)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	double d = strtod(v, &end);
	if (*end || !(d * scale >= lo) || !(d * scale <= hi)) {
		agent_log("%s=%s is out of range; using %u", name, v, def / scale);
		return def;
	}
	return (unsigned)(d * scale);
}

int send_init(void)
{
	char err[512];
	if (agent.cfg.send_dir[0]) {
		/* strata record --send, or a fork child of a sending process. */
		char dir[512];
		snprintf(dir, sizeof(dir), "%s", agent.cfg.send_dir);
		agent.cfg.send_dir[0] = 0;
		if (join(dir, agent.cfg.send_every_ms, agent.cfg.send_queue, err, sizeof(err))) {
			agent_log("process %d cannot send its profile: %s", (int)agent.pid, err);
			return -1;
		}
		send_arm(1); /* before the writer starts */
		return 0;
	}
	const char *url = getenv("STRATA_SEND");
	if (!url || !*url)
		return 0;
	char dir[512];
	if (own_spool(dir, sizeof(dir))) {
		agent_log("process %d cannot send its profile: no spool directory: %s", (int)agent.pid, strerror(errno));
		return -1;
	}
	unsigned every = env_uint("STRATA_SEND_EVERY", 15000, 100, 86400000, 1000);
	unsigned queue = env_uint("STRATA_SEND_QUEUE", 8, 1, 10000, 1);
	if (join(dir, every, queue, err, sizeof(err))) {
		agent_log("process %d cannot send its profile: %s", (int)agent.pid, err);
		return -1;
	}
	send_arm(1);
	return 0;
}

int send_start(const char *dir, unsigned every_ms, unsigned queue, int by_attach, char *err, size_t errlen)
{
	if (every_ms < 100 || every_ms > 86400000)
		every_ms = 15000;
	if (join(dir, every_ms, queue ? queue : 8, err, errlen))
		return -1;
	S.by_attach = by_attach;
	writer_send_begin();
	return 0;
}

int send_stop(int by_detach, char *err, size_t errlen)
{
	if (by_detach && !S.by_attach)
		return 0;
	if (!by_detach && !S.on) {
		snprintf(err, errlen, "not sending");
		return -1;
	}
	/* After a detach, writer_detach has ended the window with the
	 * file's stream already; an attach that failed has not. */
	if (S.on)
		writer_send_end();
	S.by_attach = 0;
	agent.cfg.send_dir[0] = 0;
	if (S.wfd >= 0)
		close(S.wfd);
	S.wfd = -1;
	return 0;
}

void send_status(char *buf, size_t n)
{
	char url[4096] = "", sent[32] = "0", err[512] = "", cfg[1024], st[1024];
	if (S.on) {
		snprintf(cfg, sizeof(cfg), "%s/%s", S.dir, SPOOL_CONFIG);
		snprintf(st, sizeof(st), "%s/%s", S.dir, SPOOL_STATUS);
		spool_kv_get(cfg, "STRATA_SEND", url, sizeof(url));
		spool_kv_get(st, "sent", sent, sizeof(sent));
		spool_kv_get(st, "error", err, sizeof(err));
	}
	snprintf(buf, n, "send=%s\nsend_every=%.3g\nsend_windows=%llu\nsend_sent=%s\nsend_dropped=%llu\nsend_error=%s\n",
		 url, S.on ? agent.cfg.send_every_ms / 1000.0 : 0.0, (unsigned long long)S.windows, sent,
		 (unsigned long long)S.dropped, err);
}

/* ---- windows (the writer, W.lock held) ------------------------------------- */

static void put(const void *d, size_t n)
{
	const char *p = d;
	while (n && S.fd >= 0 && !S.bad) {
		ssize_t w = write(S.fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			S.bad = 1;
			break;
		}
		p += w;
		n -= (size_t)w;
	}
}

static void put_session_chunk(struct wbuf *recs, uint32_t seq, uint16_t flags)
{
	struct wbuf chunk;
	wbuf_init(&chunk);
	if (recs->oom || chunk_seal(&chunk, recs->data, recs->len, S.session, seq, flags, 3))
		S.bad = 1;
	else
		put(chunk.data, chunk.len);
	wbuf_free(&chunk);
}

void send_window_open(void)
{
	if (!S.on || S.fd >= 0)
		return;
	S.t_ns = realtime_ns();
	S.start_mono = mono_ns();
	S.bad = 0;
	if (spool_window_path(S.tmp, sizeof(S.tmp), S.dir, S.t_ns, agent.pid, 1))
		return;
	S.fd = open(S.tmp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (S.fd < 0)
		return;
	struct file_header fh = { .major = STRATA_FMT_MAJOR, .minor = STRATA_FMT_MINOR, .created_ns = S.t_ns };
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	file_header_pack(hdr, &fh);
	put(hdr, sizeof(hdr));
	S.session = agent_new_stream_id();
	struct wbuf recs;
	wbuf_init(&recs);
	put_session(&recs, S.t_ns, S.start_mono);
	put_session_chunk(&recs, 0, 0);
	wbuf_free(&recs);
}

void send_window_chunk(const void *d, size_t n) { put(d, n); }

int send_window_due(uint64_t now) { return S.on && now - S.start_mono >= agent.cfg.send_every_ms * 1000000ull; }

/* Our drop count where the sender sums it for its last word (drops-PID). */
static void note_drops(void)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/drops-%d", S.dir, (int)agent.pid);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	char b[64];
	int n = snprintf(b, sizeof(b), "dropped=%llu\n", (unsigned long long)S.dropped);
	ssize_t w = write(fd, b, (size_t)n);
	(void)w;
	close(fd);
}

void send_window_close(int publish)
{
	if (S.fd < 0)
		return;
	struct rec_session_end e = { .end_mono_ns = mono_ns(), .status = 0 };
	struct wbuf recs;
	wbuf_init(&recs);
	rec_put_session_end(&recs, &e);
	put_session_chunk(&recs, 1, CHUNK_LAST);
	wbuf_free(&recs);
	if (close(S.fd))
		S.bad = 1;
	S.fd = -1;
	char final[1024];
	if (!publish || S.bad || spool_window_path(final, sizeof(final), S.dir, S.t_ns, agent.pid, 0) ||
	    rename(S.tmp, final)) {
		if (publish)
			S.failed++;
		unlink(S.tmp);
		return;
	}
	S.windows++;
	/* At most send_queue of ours wait: the oldest goes. One the sender
	 * took already is gone, and nothing is lost. */
	if (S.nq == agent.cfg.send_queue) {
		char old[1024];
		if (!spool_window_path(old, sizeof(old), S.dir, S.queue[0], agent.pid, 0) && unlink(old) == 0) {
			S.dropped++;
			note_drops();
		}
		memmove(S.queue, S.queue + 1, (S.nq - 1) * sizeof(*S.queue));
		S.nq--;
	}
	S.queue[S.nq++] = S.t_ns;
	ensure_sender();
}

/* At the end: what was dropped, said once in the program's log. */
void send_finish(void)
{
	if (S.dropped)
		agent_log("%llu window%s of process %d's profile were dropped: more were waiting to be sent than the "
			  "queue holds (%u; the collector was down or slow)",
			  (unsigned long long)S.dropped, S.dropped == 1 ? "" : "s", (int)agent.pid, agent.cfg.send_queue);
	reap();
}

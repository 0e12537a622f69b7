/*
 * launch.c — see launch.h.
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/format.h"
#include "common/fdio.h"

extern const char *agent_dir(void);

uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Appends one chunk of records from the CLI's own stream. */
static int append_chunk(const char *path, uint64_t stream, uint32_t seq, uint16_t flags, struct wbuf *recs)
{
	struct wbuf chunk;
	wbuf_init(&chunk);
	int rc = -1;
	if (!recs->oom && chunk_seal(&chunk, recs->data, recs->len, stream, seq, flags, 3) == 0) {
		int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (fd >= 0) {
			rc = fd_write_all(fd, chunk.data, chunk.len);
			close(fd);
		}
	}
	wbuf_free(&chunk);
	return rc;
}

int profile_create(const struct launch_opts *o, struct launch *l, char *err, size_t errlen)
{
	memset(l, 0, sizeof(*l));
	int fd = open(o->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "cannot write %s: %s", o->output, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* Processes append whole chunks with O_APPEND: that needs a file. */
		snprintf(err, errlen, "cannot write %s: not a regular file", o->output);
		close(fd);
		return -1;
	}
	struct file_header fh = { .major = STRATA_FMT_MAJOR, .minor = STRATA_FMT_MINOR, .created_ns = realtime_ns() };
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	file_header_pack(hdr, &fh);
	if (fd_write_all(fd, hdr, sizeof(hdr))) {
		snprintf(err, errlen, "cannot write %s: %s", o->output, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	if (!realpath(o->output, l->output_abs)) {
		snprintf(err, errlen, "cannot resolve %s: %s", o->output, strerror(errno));
		return -1;
	}
	if (getrandom(&l->session_stream, sizeof(l->session_stream), GRND_NONBLOCK) != 8)
		l->session_stream = monotonic_ns() ^ ((uint64_t)getpid() << 32);
	l->start_mono_ns = monotonic_ns();

	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	/* The events, split back out of the agent's '+'-joined form. */
	char evbuf[512] = "", *evnames[16];
	uint32_t nev = 0;
	if (o->events && *o->events) {
		snprintf(evbuf, sizeof(evbuf), "%s", o->events);
		for (char *save = NULL, *t = strtok_r(evbuf, "+", &save); t && nev < 16; t = strtok_r(NULL, "+", &save))
			evnames[nev++] = t;
	}
	struct rec_session s = {
		.strata_version = STRATA_VERSION,
		.start_realtime_ns = fh.created_ns,
		.start_mono_ns = l->start_mono_ns,
		.argc = (uint32_t)o->argc,
		.argv = o->argv,
		.mode = (uint32_t)o->mode,
		.rate_hz = o->rate_hz,
		.nevents = nev,
		.events = evnames,
		.hostname = host,
	};
	struct wbuf recs;
	wbuf_init(&recs);
	rec_put_session(&recs, &s);
	int rc = append_chunk(l->output_abs, l->session_stream, 0, 0, &recs);
	wbuf_free(&recs);
	if (rc) {
		snprintf(err, errlen, "cannot write %s: %s", o->output, strerror(errno));
		return -1;
	}
	return 0;
}

int profile_finish(struct launch *l, int wait_status)
{
	struct rec_session_end e = {
		.end_mono_ns = monotonic_ns(),
		.status = WIFSIGNALED(wait_status) ? -(int64_t)WTERMSIG(wait_status) : WEXITSTATUS(wait_status),
	};
	struct wbuf recs;
	wbuf_init(&recs);
	rec_put_session_end(&recs, &e);
	int rc = append_chunk(l->output_abs, l->session_stream, 1, CHUNK_LAST, &recs);
	wbuf_free(&recs);
	return rc;
}

void launch_agent_options(const struct launch_opts *o, char *opts, size_t n)
{
	int ol = snprintf(opts, n, "mode=%s,rate=%u,depth=%u,paused=%d,native=%d",
			  o->mode == MODE_WALL ? "wall" : "cpu", o->rate_hz, o->max_depth, o->paused, o->native);
	if (o->perf_map && ol > 0 && (size_t)ol < n)
		ol += snprintf(opts + ol, n - (size_t)ol, ",perfmap=1");
	if (o->objects_rate && ol > 0 && (size_t)ol < n)
		ol += snprintf(opts + ol, n - (size_t)ol, ",objects=%llu", (unsigned long long)o->objects_rate);
	if (o->events && *o->events && ol > 0 && (size_t)ol < n)
		ol += snprintf(opts + ol, n - (size_t)ol, ",events=%s,period=%llu", o->events,
			       (unsigned long long)o->event_period);
	if (o->send_options && ol > 0 && (size_t)ol < n)
		snprintf(opts + ol, n - (size_t)ol, "%s", o->send_options);
}

int launch_start(const struct launch_opts *o, struct launch *l, int *exit_code, char *err, size_t errlen)
{
	const char *dir = agent_dir();
	char agent[PATH_MAX + 32];
	snprintf(agent, sizeof(agent), "%s/libstrata-agent.so", dir ? dir : ".");
	if (access(agent, R_OK)) {
		snprintf(err, errlen, "cannot find the agent %s (set STRATA_AGENT_DIR, or rebuild with make)", agent);
		*exit_code = 2;
		return -1;
	}
	char preload[PATH_MAX * 2];
	const char *old = getenv("LD_PRELOAD");
	if (old && *old)
		snprintf(preload, sizeof(preload), "%s:%s", agent, old);
	else
		snprintf(preload, sizeof(preload), "%s", agent);
	char opts[2048];
	launch_agent_options(o, opts, sizeof(opts));

	/* The child reports a failed exec through a close-on-exec pipe: EOF
	 * means the exec succeeded. */
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		*exit_code = 2;
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		*exit_code = 2;
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		setenv("LD_PRELOAD", preload, 1);
		if (o->no_output)
			setenv("STRATA_AGENT", "1", 1);
		else
			setenv("STRATA_OUTPUT", l->output_abs, 1);
		setenv("STRATA_OPTIONS", opts, 1);
		/* Numba then emits DWARF line tables for the code it compiles:
		 * what maps JIT machine code to the @njit source lines. */
		if (o->jit_lines)
			setenv("NUMBA_DEBUGINFO", "1", 1);
		execvp(o->argv[0], o->argv);
		int e = errno;
		ssize_t w = write(p[1], &e, sizeof(e));
		(void)w;
		_exit(127);
	}
	close(p[1]);
	int e = 0;
	ssize_t n;
	do
		n = read(p[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	l->pid = pid;
	if (n == (ssize_t)sizeof(e)) {
		int st;
		waitpid(pid, &st, 0);
		l->pid = 0;
		if (e == ENOENT) {
			snprintf(err, errlen, "%s: command not found", o->argv[0]);
			*exit_code = 127;
		} else {
			snprintf(err, errlen, "%s: %s", o->argv[0], strerror(e));
			*exit_code = 126;
		}
		return -1;
	}
	return 0;
}

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
}

int launch_wait(struct launch *l)
{
	child_pid = l->pid;
	struct sigaction fw, ign, old_int, old_quit;
	memset(&fw, 0, sizeof(fw));
	fw.sa_handler = forward;
	sigemptyset(&fw.sa_mask);
	fw.sa_flags = SA_RESTART;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	int fwd[] = { SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM };
	for (size_t i = 0; i < sizeof(fwd) / sizeof(fwd[0]); i++)
		sigaction(fwd[i], &fw, NULL);
	/* Ctrl-C and Ctrl-\ go to the whole foreground group: the command
	 * decides what they mean, we wait for it to finish writing. */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	int st = 0;
	while (waitpid(l->pid, &st, 0) < 0) {
		if (errno != EINTR) {
			st = 0;
			break;
		}
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	child_pid = 0;
	return st;
}

void exit_like(int st)
{
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);
		fflush(NULL);
		signal(sig, SIG_DFL);
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, sig);
		sigprocmask(SIG_UNBLOCK, &s, NULL);
		/* No core file for a re-raised SIGQUIT/SIGSEGV: the command
		 * already dumped one if it was going to. */
		struct rlimit no_core = { 0, 0 };
		setrlimit(RLIMIT_CORE, &no_core);
		raise(sig);
		exit(128 + sig);
	}
	exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

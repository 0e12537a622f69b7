/*
 * agentd.c — strata-agentd: the helper process of a profiled process and
 * of the fork children that stay in its region (its tree: link.h).
 *
 * Started by the profiled process (link.c) with, at fixed descriptor
 * numbers, the shared region, the target's /proc/PID/mem and the control
 * socket; arguments: the target's pid, the region's address and size,
 * and the target's state in it. It maps the region where the target has
 * it, loads the reader of the target's interpreter version, and runs the
 * writer, the control channels (each from its first client on) and
 * (wall mode) the samplers in threads of its own, while its main thread
 * serves the links, takes in fork children (a socket: link.h) and
 * watches each target:
 *
 *   - requests on the link (link.h; futex words in the shared region):
 *     a poke (wake the writer), the perf events of new threads to open,
 *     the region to grow, or FINISH: drain, end the stream, answer,
 *     leave;
 *   - the target's old address space gone (its /proc/PID/mem descriptor
 *     reads nothing) with the target alive: it exec'd without the exec
 *     wrapper knowing: end the stream;
 *   - the target's pidfd readable: it died (a signal, a crash, SIGKILL):
 *     the rings are still here, so everything it sampled is written, and
 *     the stream is ended.
 *
 * Each target's stream ends on its own; the helper leaves with the last.
 * SIGTERM ends every stream (detached) and the helper; the targets run
 * on unprofiled. Terminal signals do not reach the helper (it has a session
 * of its own).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/procstat.h"
#include "shm/agent.h"
#include "agentd.h"
#include "cfi-synth.h"
#include "shm/link.h"
#include "remote.h"
#include "shm/shm.h"
#include "target.h"
#include "shm/unwind.h"
#include "common/ctlproto.h"
#include "common/format.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static struct agent_state none;
__thread struct agent_state *agentp = &none;
const struct strata_pyreader *agentd_reader;

/* The helper's own: how SIGTERM reaches the main thread, the socket
 * fork children of the tree join on, the targets. */
static struct {
	int term[2];
	int debug;
	int lfd;                     /* the tree's socket (link.h), or -1 */
	uint64_t key;
	struct target *t[AGENTD_TARGETS_MAX];
	int n;
	int served;                  /* processes served, the first included */
	char python_version[64];     /* the first's: joiners run the same */
} D = { .term = { -1, -1 }, .lfd = -1 };

/* What this file keeps of each process served. */
struct proc {
	int pidfd;
	int memfd;                   /* its /proc/PID/mem, opened by itself */
	pthread_mutex_t finish_lock;
	int finished;                /* its stream is ended */
	int freed;                   /* its blocks in the region went back (or never taken: a failed join) */
	int told_scan;               /* a scanned thread's event failed: said */
	uint64_t writer_round;       /* freed: the writer's round then */
	uint32_t seen;               /* the last link ticket served */
	int64_t look_ms;             /* when to look for an exec next */
	char ctl_path[256];
	struct stat ctl_st;
	int ctl_ok;
};

static void proc_init(struct proc *p)
{
	p->pidfd = p->memfd = -1;
	pthread_mutex_init(&p->finish_lock, NULL);
}

TARGET_STATE(struct proc, proc, proc_init)
#define P (*proc_of(agentd_target))

int agentd_target_pidfd(void) { return P.pidfd; }

static int log_line(const char *buf, int n);

/* Messages go to the target's standard error as it is now (the helper
 * holds none of the program's descriptors). */
void agent_log(const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "strata: ");
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	log_line(buf, n);
}

/* Returns whether the line was written. */
static int log_line(const char *buf, int n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/2", (int)agent.pid);
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && D.debug)
		fd = dup(2);
	if (fd < 0)
		return 0;
	ssize_t w = write(fd, buf, (size_t)n);
	close(fd);
	return w == n;
}

/* The helper cannot serve the process: says why on its standard error,
 * and leaves the reason where the process reads it (agent.helper_why),
 * so the profile names it even if this helper had no descriptor left to
 * write with. */
static void start_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void start_failed(const char *fmt, ...)
{
	char why[sizeof(agent.helper_why)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "strata: process %d: %s; it is not profiled\n", (int)agent.pid, why);
	if (n > (int)sizeof(buf) - 1)
		n = (int)sizeof(buf) - 1;
	if (agentp != &none) {
		snprintf(agent.helper_why, sizeof(agent.helper_why), "%s", why);
		atomic_store(&agent.helper_why_logged, log_line(buf, n));
	} else {
		log_line(buf, n);
	}
}

static void dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dbg(const char *fmt, ...)
{
	if (!D.debug)
		return;
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	agent_log("agentd %d: %s", (int)getpid(), buf);
}

static void on_term(int sig)
{
	(void)sig;
	char c = 1;
	ssize_t w = write(D.term[1], &c, 1);
	(void)w;
	/* The main thread may be waiting on the doorbell, and the signal
	 * may have reached another thread. */
	link_ring(shm_doorbell(), INT_MAX);
}

/* How the reader reads the current target (remote.c reads the calling
 * thread's). */
static struct strata_remote reader_env(void)
{
	struct strata_remote r = { .read = remote_read_cb, .ctx = NULL, .syms = agent.pysyms };
	return r;
}

/* The reader of this interpreter's memory: the exact version's, else
 * another build of the same X.Y (as the target's own module). */
static const struct strata_pyreader *load_reader(void)
{
	char path[4400];
	const char *v = agent.python_version;
	/* The build of the target's module: the layout it was checked with. */
	snprintf(path, sizeof(path), "%s/strata-pyreader-%s.so", agent.agent_dir,
		 agent.module_version[0] ? agent.module_version : v);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	char first_err[512] = "";
	if (!h) {
		const char *de = dlerror();
		/* Kept only when the build is there: a missing file is
		 * the usual "other patch release" case, tried next. */
		if (de && access(path, F_OK) == 0)
			snprintf(first_err, sizeof(first_err), "%s", de);
		char minor[64];
		const char *d1 = strchr(v, '.');
		const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
		int ml = (int)(d2 ? (size_t)(d2 - v) : strlen(v));
		if (ml > 16)
			ml = 16;
		snprintf(minor, sizeof(minor), "strata-pyreader-%.*s.", ml, v);
		DIR *dp = opendir(agent.agent_dir);
		struct dirent *e;
		while (dp && !h && (e = readdir(dp)))
			if (!strncmp(e->d_name, minor, strlen(minor))) {
				snprintf(path, sizeof(path), "%s/%s", agent.agent_dir, e->d_name);
				h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
			}
		if (dp)
			closedir(dp);
	}
	if (!h) {
		if (first_err[0])
			start_failed("cannot load the reader for Python %s: %s", v, first_err);
		else
			start_failed("no reader for Python %s in %s", v, agent.agent_dir);
		return NULL;
	}
	strata_pyreader_init_fn init = (strata_pyreader_init_fn)dlsym(h, STRATA_PYREADER_INIT_SYM);
	struct strata_remote r = reader_env();
	const struct strata_pyreader *rd = init ? init(&r) : NULL;
	if (!rd || rd->api_version != STRATA_PYAPI_VERSION) {
		start_failed("the reader %s does not match this agent", path);
		return NULL;
	}
	/* The target's module passed the same check in the target; the
	 * reader may be another patch release's build. */
	char exe[4096], why[1024];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)agent.pid);
	ssize_t el = readlink(path, exe, sizeof(exe) - 1);
	exe[el > 0 ? el : 0] = 0;
	if (rd->check(exe, why, sizeof(why))) {
		start_failed("%s", why);
		return NULL;
	}
	return rd;
}

void helper_slot_release(struct tslot *s)
{
	if (s->helper_fd >= 0)
		close(s->helper_fd);
	s->helper_fd = -1;
	for (int i = 0; i < EVENTS_MAX; i++)
		if (s->helper_counter_fd[i] >= 0) {
			close(s->helper_counter_fd[i]);
			s->helper_counter_fd[i] = -1;
		}
	if (s->stat_fd >= 0)
		close(s->stat_fd);
	s->stat_fd = -1;
	free(s->wall_cache);
	s->wall_cache = NULL;
}

/* Why the target ended, when it is gone without saying: its wait status
 * while it is a zombie (field 52 of /proc/PID/stat), if still readable. */
static int death_reason(void)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)agent.pid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	if (!rp)
		return END_SIGNAL;
	const char *f = procstat_field(rp, 52);
	int st = f ? atoi(f) : 0;
	return WIFEXITED(st) ? END__EXIT : END_SIGNAL;
}

/* Removes the control socket if it still is ours: after an exec the new
 * program's agent may already have bound its own at the same path. */
static void unlink_ctl(void)
{
	struct stat st;
	if (P.ctl_ok && stat(P.ctl_path, &st) == 0 && st.st_ino == P.ctl_st.st_ino && st.st_dev == P.ctl_st.st_dev)
		unlink(P.ctl_path);
}

/* Events we opened for threads found by a scan, and not yet taken by the
 * thread: disabled and dropped before we answer, so that nothing of ours
 * keeps an event alive after the target is gone or replaced. */
static void drop_events(void)
{
	reg_lock();
	for (struct tslot *s = agent.slots; s; s = s->next) {
		if (s->helper_fd >= 0)
			trigger_fd_enable(s->helper_fd, 0, 0);
		helper_slot_release(s);
	}
	reg_unlock();
}

static void finish(int reason)
{
	dbg("finishing, reason %d", reason);
	control_stop();
	wall_stop();
	atomic_store(&agent.stopping, 1);
	atomic_store(&agent.sampling, 0);
	drop_events();
	writer_finish(reason);
	if (reason != END_EXEC)
		unlink_ctl();
}

/* The stream ends once, on FINISH, the target's death, an exec or SIGTERM,
 * whichever the main thread sees first. A FINISH the target
 * posted just before it died keeps its reason. ticket: the request served
 * (published to the waiting target), 0 for none. */
static void finish_once(int reason, uint32_t ticket)
{
	pthread_mutex_lock(&P.finish_lock);
	if (!P.finished) {
		if (!ticket && (atomic_load(&agent.link_req) & LINK_REQ_FINISH))
			reason = (int)atomic_load(&agent.link_reason);
		P.finished = 1;
		finish(reason);
	}
	if (ticket) {
		atomic_store(&agent.link_done, ticket);
		link_futex_wake(&agent.link_done, INT_MAX);
	}
	pthread_mutex_unlock(&P.finish_lock);
}

/* Opens the perf events of threads that asked for one (cpu mode: the
 * thread then holds no descriptor; the event signals it all the same,
 * F_SETOWN_EX names the thread, not a process). */
static int open_triggers(void)
{
	if (agent.trigger != TRIGGER_PERF_TASK_CLOCK || atomic_load(&agent.stopping))
		return 0;
	/* Not held up by one process (a stopped thread of it holding its
	 * list) from serving the others: tried again at the next look. */
	if (reg_lock_for(20))
		return -1;
	for (struct tslot *s = agent.slots; s; s = s->next) {
		if (!atomic_load(&s->helper_trigger) || atomic_load(&s->exited) || s->helper_fd >= 0 ||
		    s->trigger_failed)
			continue;
		if (trigger_open(s, s->tid) == 0 && s->trigger_fd >= 0) {
			s->helper_fd = s->trigger_fd;
			s->trigger_fd = -1;
		} else {
			s->trigger_failed = errno ? errno : EINVAL;
			/* A thread found by a scan (an agent loaded with
			 * dlopen) has no timer to fall back on: a timer is
			 * made by its own process (threads.c does that for
			 * the others, and says so). */
			if (s->external && !P.told_scan) {
				P.told_scan = 1;
				char lim[64];
				fd_limit_note(lim, sizeof(lim), s->trigger_failed);
				agent_note(NOTE_STOPPED, (uint32_t)s->tid, "the helper could not open a perf event for "
					   "thread %d (%s%s): it and later threads found by a scan are not sampled",
					   (int)s->tid, strerror(s->trigger_failed), lim);
			}
		}
	}
	reg_unlock();
	return 0;
}

/* Serves the target's requests (link.h) posted up to ticket t. Returns
 * 1 when the request was FINISH (the stream is ended). */
static int serve_link(uint32_t t)
{
	uint32_t bits = atomic_exchange(&agent.link_req, 0);
	if (bits & LINK_REQ_GROW) {
		shm_grow(atomic_load(&agent.link_grow));
		atomic_store(&agent.link_grown, t);
		link_futex_wake(&agent.link_grown, INT_MAX);
	}
	if (bits & LINK_REQ_POKE)
		writer_poke();
	if (!(bits & LINK_REQ_FINISH) && open_triggers()) {
		/* The rest waits for the list: served again at the next look
		 * (the ticket unpublished). */
		atomic_fetch_or(&agent.link_req, bits & ~(uint32_t)(LINK_REQ_GROW | LINK_REQ_POKE));
		P.seen = t - 1;
		return 0;
	}
	if (bits & LINK_REQ_FINISH) {
		finish_once((int)atomic_load(&agent.link_reason), t);
		return 1;
	}
	atomic_store(&agent.link_done, t);
	link_futex_wake(&agent.link_done, INT_MAX);
	return 0;
}

/* Whether the target's address space we were started in is gone: the
 * /proc/PID/mem descriptor reads nothing once the target exec'd (or is
 * dying). */
static int target_mm_gone(void)
{
	uint64_t v;
	return pread(P.memfd, &v, sizeof(v), (off_t)shm_addr()) != (ssize_t)sizeof(v);
}

int agentd_target_gone(void) { return target_mm_gone(); }

/* Once our view of its address space is gone: whether the target has
 * another one (it exec'd; a dying process has none, and its exe link
 * reads ENOENT). */
static int target_execd(void)
{
	char path[64], exe[512];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)agent.pid);
	return readlink(path, exe, sizeof(exe)) > 0;
}

/* Whether the target still runs, waiting up to ms for it to end: a
 * process gives up its address space a moment before it becomes a
 * zombie, so the address space alone does not tell a death from an
 * exec. */
static int target_alive(int ms)
{
	if (P.pidfd >= 0) {
		struct pollfd pf = { P.pidfd, POLLIN, 0 };
		int r;
		do
			r = poll(&pf, 1, ms);
		while (r < 0 && errno == EINTR);
		return r == 0;
	}
	for (int waited = 0;; waited += 10) {
		if (kill(agent.pid, 0) != 0 && errno != EPERM)
			return 0;
		if (waited >= ms)
			return 1;
		usleep(10000);
	}
}

/* However the helper leaves (done, or unable to start), the processes it
 * served stop waiting for it. */
static void leaving(void)
{
	for (int i = 0; i < D.n; i++) {
		struct target *t = D.t[i];
		if (!t->state || proc_of(t)->freed)
			continue;
		atomic_store(&t->state->link_gone, getpid());
		link_futex_wake(&t->state->link_done, INT_MAX);
		link_futex_wake(&t->state->link_grown, INT_MAX);
	}
}

/* Starts serving the current target (its state mapped, entered), whose
 * /proc/PID/mem is memfd and control socket ctlfd (-1: none): the
 * reader's view of it, its loaded objects, its writer, its sampler and
 * control channel. 0, or -1 once start_failed said why. */
static int target_start(int memfd, int ctlfd)
{
	struct target *t = agentd_target;
	pid_t pid = t->pid;
	P.memfd = memfd;
	remote_init(pid, memfd);
	P.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	P.seen = atomic_load(&agent.link_seq) - 1;
	D.served++;
	dbg("started for process %d", (int)pid);
	/* What the reader keeps of this process is the target's: every
	 * thread that enters it reads with it. */
	struct strata_remote renv = reader_env();
	t->reader = agentd_reader->target_new(&renv);
	if (!t->reader) {
		start_failed("the agent's helper is out of memory");
		goto fail;
	}
	t->reader_use = agentd_reader->target_use;
	target_enter(t);
	if (agent.cfg.native && unwind_init()) {
		agent_log("cannot read the loaded objects of process %d; native stacks are off", (int)pid);
		agent.cfg.native = 0;
	}
	if (agent.cfg.perf_map)
		jitdump_start();
	if (agent.cfg.mode == MODE_WALL && !agent.sampler_slot) {
		start_failed("the wall sampler has no ring");
		goto fail;
	}
	/* A standby agent with an output by path is the fork child of a
	 * process that was being recorded after an attach: it records into
	 * the same file, as the child of a process started by strata record
	 * does (the CLI detaches it with its parent). */
	int standby = agent.standby && !(atomic_load(&agent.has_output) && agent.cfg.output[0]);
	/* Continuous profiling (send.c): windows from the start. A standby
	 * agent that was to send and cannot samples nothing. */
	send_init();
	if (standby && agent.standby && !send_active()) {
		agent.cfg.paused = 1;
		atomic_store(&agent.sampling, 0);
	}
	if (standby ? writer_start_standby() : writer_start()) {
		int e = errno;
		char lim[64];
		fd_limit_note(lim, sizeof(lim), e);
		if (standby)
			start_failed("cannot start the writer: %s%s", strerror(e), lim);
		else
			start_failed("cannot open the profile %s: %s%s", agent.cfg.output, strerror(e), lim);
		goto fail;
	}
	if (agent.cfg.mode == MODE_WALL)
		wall_start();
	/* The control socket the target bound (it is at a path the target
	 * chose by the same rules). */
	struct stat cst;
	if (ctlfd >= 0 && fstat(ctlfd, &cst) == 0 && S_ISSOCK(cst.st_mode)) {
		char dir[256];
		if (!ctl_sock_dir(dir, sizeof(dir), getenv("XDG_RUNTIME_DIR"), geteuid()) &&
		    !ctl_sock_path(P.ctl_path, sizeof(P.ctl_path), dir, pid) && stat(P.ctl_path, &P.ctl_st) == 0)
			P.ctl_ok = 1;
		control_start(ctlfd, P.ctl_ok ? P.ctl_path : "");
	} else if (ctlfd >= 0 && ctlfd != AGENTD_FD_CTL) {
		close(ctlfd);
	}
	return 0;
fail:
	atomic_store(&agent.sampling, 0);
	if (ctlfd >= 0)
		close(ctlfd);
	return -1;
}

/* A target whose stream is ended and whose process no longer uses the
 * region (dead, or exec'd): its blocks in the region go back (a tree
 * that churns workers must not fill it), unless another helper took the
 * process over (its exec failed and it started a new one). */
static void target_release(void)
{
	if (P.freed)
		return;
	P.freed = 1;
	if (atomic_load(&agent.helper_pid) == getpid()) {
		uint64_t n = shm_free_owned(agentp);
		dbg("process %d: %llu bytes of the region freed", (int)agentd_target->pid, (unsigned long long)n);
	}
	if (P.memfd >= 0)
		close(P.memfd);
	if (P.pidfd >= 0)
		close(P.pidfd);
	P.memfd = P.pidfd = -1;
	P.writer_round = writer_round();
}

/* Drops the targets whose blocks went back, once no thread of ours can
 * be on them (the main thread is the only other): what the reader kept
 * of each, and its states. The first stays (its pid names the helper). */
static void targets_drop(void)
{
	int k = 1;
	for (int i = 1; i < D.n; i++) {
		struct target *t = D.t[i];
		if (proc_of(t)->freed && writer_past(proc_of(t)->writer_round)) {
			if (t->reader)
				agentd_reader->target_free(t->reader);
			target_free(t);
			continue;
		}
		D.t[k++] = t;
	}
	D.n = k;
	target_enter(D.t[0]);
}

/* Serves the current target: its link requests, a first client on its
 * control socket, its death or an exec. Returns 1 once its stream is
 * ended. */
static int serve_target(int64_t now)
{
	uint32_t t = atomic_load(&agent.link_seq);
	if (t != P.seen) {
		P.seen = t;
		if (serve_link(t))
			return 1; /* finished on the target's request */
	}
	struct pollfd pf[2] = {
		{ P.pidfd, POLLIN, 0 },
		{ control_pollfd(), POLLIN, 0 },
	};
	int r = poll(pf, 2, 0);
	if (pf[1].fd >= 0 && r > 0 && (pf[1].revents & POLLIN))
		control_wake();
	if ((P.pidfd >= 0 && r > 0 && (pf[0].revents & POLLIN)) || (P.pidfd < 0 && !target_alive(0))) {
		finish_once(death_reason(), 0);
		return 1;
	}
	/* An exec the wrapper did not see is found by looking: often while
	 * sampling, now and then while not. */
	if (now >= P.look_ms) {
		P.look_ms = now + (atomic_load(&agent.sampling) ? 100 : 500);
		if (target_mm_gone()) {
			finish_once(target_execd() || target_alive(1000) ? END_EXEC : death_reason(), 0);
			return 1;
		}
	}
	return 0;
}

/* ---- the tree: fork children that stay in the region (link.h) ---- */

/* Listens for the tree's fork children, where they may stay in the
 * region (mapped whole everywhere). Without the socket each child
 * starts a helper of its own, as before. */
static void tree_listen(void)
{
	if (!shm_full_map())
		return;
	uint64_t key = 0;
	if (getrandom(&key, sizeof(key), GRND_NONBLOCK) != (ssize_t)sizeof(key))
		key = mono_ns() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return;
	struct sockaddr_un a;
	socklen_t al = link_tree_addr(&a, getpid(), key);
	if (bind(fd, (struct sockaddr *)&a, al) || listen(fd, 128)) {
		dbg("no tree socket: %s", strerror(errno));
		close(fd);
		return;
	}
	D.lfd = fd;
	D.key = key;
	shm_set_tree(getpid(), key);
}

static void reply(int c, int32_t status)
{
	ssize_t w = send(c, &status, sizeof(status), MSG_NOSIGNAL);
	(void)w;
}

/* No more children join (the helper is leaving): those that were
 * joining as it left are refused, and start helpers of their own, as
 * do those that come later. */
static void tree_close(void)
{
	if (D.lfd < 0)
		return;
	uint64_t key = 0;
	if (shm_tree(&key) == getpid() && key == D.key)
		shm_set_tree(0, 0);
	int c;
	while ((c = accept4(D.lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		reply(c, ECONNREFUSED);
		close(c);
	}
	close(D.lfd);
	D.lfd = -1;
}

/* One child's request to join: checked, then served like the first
 * target. Returns 1 when it was taken. */
static int join_one(int c)
{
	/* An abstract socket is open to every user of the network
	 * namespace: only our own user's processes are heard out. */
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) || cr.uid != getuid()) {
		reply(c, EPERM);
		return 0;
	}
	struct timeval tv = { 2, 0 };
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct link_join m;
	char cbuf[CMSG_SPACE(2 * sizeof(int))];
	struct iovec iov = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
	int fds[2] = { -1, -1 }, nfds = 0;
	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t j = 0; j < k; j++) {
				int fd;
				memcpy(&fd, CMSG_DATA(cm) + j * sizeof(int), sizeof(int));
				if (nfds < 2)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
	struct agent_state *st = (struct agent_state *)(uintptr_t)(shm_addr() + (n == (ssize_t)sizeof(m) ? m.state : 0));
	int ok = n == (ssize_t)sizeof(m) && m.magic == LINK_JOIN_MAGIC && nfds == 1 + (m.has_ctl != 0) &&
		 cr.pid == m.pid && m.state &&
		 shm_contains(st, sizeof(*st)) && st->pid == m.pid && D.n < AGENTD_TARGETS_MAX && D.n > 0 &&
		 !strncmp(st->python_version, D.python_version, sizeof(D.python_version));
	struct target *t = ok ? target_new(m.pid) : NULL;
	if (!t) {
		dbg("a join refused (%zd bytes, %d descriptors)", n, nfds);
		for (int j = 0; j < nfds; j++)
			close(fds[j]);
		reply(c, ok ? ENOMEM : EINVAL);
		return 0;
	}
	t->state = st;
	D.t[D.n++] = t;
	target_enter(t);
	if (target_start(fds[0], nfds > 1 ? fds[1] : -1)) {
		target_release(); /* its descriptors; its blocks stay the process's */
		reply(c, EINVAL);
		return 0;
	}
	reply(c, 0);
	return 1;
}

/* Takes the children waiting to join. Returns how many were. */
static int take_joins(void)
{
	int took = 0;
	for (int k = 0; D.lfd >= 0 && k < 64; k++) {
		int c = accept4(D.lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			break;
		took += join_one(c);
		close(c);
	}
	return took;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "%s: the helper of libstrata-agent.so; it is started by the agent, not by hand\n",
			AGENTD_NAME);
		return 2;
	}
	pid_t pid = (pid_t)strtol(argv[1], NULL, 10);
	uint64_t addr = strtoull(argv[2], NULL, 0), max = strtoull(argv[3], NULL, 10);
	uint64_t state_off = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
	D.debug = getenv("STRATA_DEBUG_AGENTD") != NULL;
	/* The process served first: every module's state for it. */
	agentd_target = target_new(pid);
	if (!agentd_target)
		return 1;

	/* Signals: the spawner blocked them all. */
	struct sigaction ign;
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	int ignored[] = { SIGINT, SIGQUIT, SIGHUP, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE, SIGUSR1, SIGUSR2, SIGPROF, SIGALRM };
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
		sigaction(ignored[i], &ign, NULL);
	none.pid = pid;
	struct sigaction st;
	memset(&st, 0, sizeof(st));
	st.sa_handler = on_term;
	sigaction(SIGTERM, &st, NULL);
	sigset_t none_set;
	sigemptyset(&none_set);
	sigprocmask(SIG_SETMASK, &none_set, NULL);

	/* Where Yama allows ptrace of descendants only (scope 1), the
	 * process this helper serves (not its parent: the helper was
	 * reparented) may still take copies of the descriptors held for it
	 * (pidfd_getfd: its -e counters, and its event before an exec this
	 * helper did not finish in time). Yama extends that to the named
	 * process's descendants: the tree's fork children. Without Yama:
	 * EINVAL, nothing. */
	prctl(PR_SET_PTRACER, (unsigned long)pid, 0, 0, 0);

	/* The helper holds every thread's event: as many descriptors as
	 * the hard limit allows (the program's soft limit was for its own). */
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < nf.rlim_max) {
		nf.rlim_cur = nf.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nf);
	}

	if (shm_attach(AGENTD_FD_SHM, addr, max)) {
		int e = errno;
		char lim[96];
		shm_limit_note(lim, sizeof(lim), e);
		start_failed("the agent's helper cannot map the shared region at 0x%llx: %s%s",
			     (unsigned long long)addr, strerror(e), lim);
		return 1;
	}
	fcntl(AGENTD_FD_SHM, F_SETFD, FD_CLOEXEC);
	fcntl(AGENTD_FD_MEM, F_SETFD, FD_CLOEXEC);
	fcntl(AGENTD_FD_CTL, F_SETFD, FD_CLOEXEC);
	/* The state of the process that started us: named (its region may
	 * be its tree's), or the region's first. */
	struct agent_state *s = state_off ? (struct agent_state *)(uintptr_t)(addr + state_off) : shm_root();
	if (!s || !shm_contains(s, sizeof(*s)) || s->pid != pid)
		return 1;
	agentd_target->state = s;
	D.t[D.n++] = agentd_target;
	target_enter(agentd_target);
	atexit(leaving);
	if (pipe2(D.term, O_CLOEXEC | O_NONBLOCK)) {
		int e = errno;
		char lim[64];
		fd_limit_note(lim, sizeof(lim), e);
		start_failed("the agent's helper cannot make a pipe: %s%s", strerror(e), lim);
		return 1;
	}

	cfisynth_set_libdir(agent.agent_dir);
	remote_init(pid, AGENTD_FD_MEM);
	agentd_reader = load_reader();
	if (!agentd_reader) {
		atomic_store(&agent.sampling, 0);
		return 1;
	}
	if (target_start(AGENTD_FD_MEM, AGENTD_FD_CTL))
		return 1;
	/* Kept: the first target's state goes back to the region when its
	 * process ends, and the tree may live on. */
	snprintf(D.python_version, sizeof(D.python_version), "%s", agent.python_version);
	tree_listen();

	/* One thread serves the links and watches the targets: a task
	 * fewer against the cgroup's pids.max than a thread for each. It
	 * waits on the region's doorbell, which each process rings for
	 * each request (as promptly as a thread of its own did); between
	 * requests, at most every 100 ms while sampling and 500 ms while
	 * not, it looks at the rest: a target's death (its pidfd), an exec
	 * it was not told of, SIGTERM (whose handler also rings), a first
	 * client on a control socket, fork children joining. It leaves with
	 * the last target. */
	_Atomic uint32_t *bell = shm_doorbell();
	for (;;) {
		uint32_t b = atomic_load(bell);
		char tc;
		int term = read(D.term[0], &tc, 1) == 1;
		int64_t now = (int64_t)(mono_ns() / 1000000u);
		int live = 0, sampling = 0;
		for (int i = 0; i < D.n; i++) {
			target_enter(D.t[i]);
			if (P.finished || P.freed) {
				if (!P.freed && !term && (!target_alive(0) || target_mm_gone()))
					target_release();
				continue;
			}
			if (term)
				finish_once(END_DETACH, 0);
			if (term || serve_target(now))
				continue;
			live++;
			sampling |= atomic_load(&agent.sampling);
		}
		if (term)
			break;
		targets_drop();
		if (take_joins())
			continue;
		if (!live)
			break;
		int ms = sampling ? 100 : 500;
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
		link_futex_wait(bell, b, &ts);
	}
	tree_close();
	dbg("done: served %d processes, %llu bytes of the region in use", D.served, (unsigned long long)shm_used());
	return 0;
}

/*
 * agent.c — lifecycle of the agent in the profiled process.
 *
 * libstrata-agent.so is preloaded (LD_PRELOAD) into every process that
 * `strata record` starts, Python or not. Its constructor decides whether
 * there is anything to do: the output must be configured (STRATA_OUTPUT),
 * or standby asked for (STRATA_AGENT=1: no output until one is attached
 * through the control channel), and the process must contain a CPython
 * (Py_GetVersion is exported by every python executable and libpython).
 * The Python module can also load it with dlopen (strata_agent_load).
 *
 * Setting up: the shared region and the state in it, the module built for
 * this interpreter version, the signal handlers, the control socket, the
 * helper (link.c), then the threads' slots. Ending: exit(), _exit() and
 * exec() ask the helper to finish the stream and wait for its answer
 * (bounded; nothing the program holds is needed for it); a process killed
 * by a signal is finished by the helper when it sees the process gone. A
 * fork child gets a region and a helper of its own.
 *
 * Anything else (a shell, /bin/true, a compiler started by a build) is left
 * alone except that exec() and posix_spawn() keep the variables that carry
 * profiling to grandchildren.
 *
 * The options are parsed by options.c; the module for this interpreter is
 * found, loaded and (built for another patch release) checked by
 * pymodule.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/agent.h"
#include "ctlsock.h"
#include "shm/grave.h"
#include "shm/jitdump.h"
#include "shm/link.h"
#include "shm/objects.h"
#include "shm/shm.h"
#include "shm/unwind.h"
#include "common/format.h"
#include "options.h"
#include "pymodule.h"

/* CPython minor versions src/py/pyframes.c has accessors for (the
 * Makefile's SUPPORTED_MINORS): outside them, building cannot help. */
#define PY_MINOR_FIRST 8
#define PY_MINOR_LAST 15

static struct agent_state inactive;
struct agent_state *agentp = &inactive;
const struct strata_pyapi *agent_py;

int agent_safe_read(void *dst, uint64_t src, size_t n)
{
	if (!src)
		return -1;
	struct iovec local = { dst, n };
	struct iovec remote = { (void *)(uintptr_t)src, n };
	ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	return r == (ssize_t)n ? 0 : -1;
}

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
	ssize_t w = write(2, buf, (size_t)n);
	(void)w;
}

/* The directory this library is in: the modules and the helper are there. */
static void find_agent_dir(char *dir, size_t n)
{
	Dl_info info;
	if (!dladdr((void *)&find_agent_dir, &info) || !info.dli_fname) {
		snprintf(dir, n, ".");
		return;
	}
	snprintf(dir, n, "%s", info.dli_fname);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, n, ".");
}

/* ---- code object deaths (the module's deallocation hook) ------------------ */

int code_death_wanted(uint64_t addr)
{
	/* Idle (sampling off, rings drained): no sample can name a code
	 * object that dies now, and nothing would take the record. */
	return agent.active && atomic_load_explicit(&agent.layout, memory_order_relaxed) == LAYOUT_OK &&
	       atomic_load_explicit(&agent.has_output, memory_order_relaxed) &&
	       !atomic_load_explicit(&agent.writer_idle, memory_order_relaxed) && agent.code_seen &&
	       agent.code_seen[code_seen_slot(addr)];
}

void code_death(uint64_t addr, struct strata_codeinfo *info)
{
	if (agent.grave)
		grave_put(agent.grave, addr, mono_ns(), info);
	free(info->filename);
	free(info->name);
	free(info->qualname);
	free(info->linetable);
}

/* ---- a Python we have no module for ---------------------------------------- */

/* Leaves one record so the CLI can say which process was skipped and why.
 * No helper is started for such a process: the record is written here. */
static void note_unsupported(const char *output, int refused)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	agent_note_unsupported(output, getpid(), getppid(), agent.python_version, exe, refused);
}

/* The agent could not start in a supported Python: the CLI says which
 * process, and why, rather than that no Python ran. Our own descriptors
 * are closed by now, so the note finds one where the failure was ours. */
static void note_not_profiled(const char *output, const char *version, const char *why)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	agent_note_unprofiled(output, getpid(), getppid(), version, exe, PROC_UNSUPPORTED | PROC_NOT_PROFILED, why);
}

/* ---- the state ------------------------------------------------------------- */

static void init_reg_lock(void)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&agent.reg_lock, &a);
	pthread_mutexattr_destroy(&a);
}

/* The per-process parts of the state, for a new process (start, fork
 * child). inherited: the state is a copy of the parent's; else it was just
 * allocated, and reads as zeros without being written (shm_alloc): its
 * tables are left untouched, each page of them a fault saved at start. */
static int state_fresh(int inherited)
{
	agent.pid = getpid();
	agent.stream = agent_new_stream_id();
	agent.start_ns = mono_ns();
	atomic_store(&agent.helper_pid, 0);
	init_reg_lock();
	agent.slots = NULL;
	if (inherited)
		memset(agent.tidtab, 0, sizeof(agent.tidtab));
	atomic_store(&agent.stopping, 0);
	agent.sampler_slot = NULL;
	atomic_store(&agent.retired_samples, 0);
	atomic_store(&agent.retired_dropped, 0);
	atomic_store(&agent.handoff_waits, 0);
	atomic_store(&agent.handoff_ns, 0);
	atomic_store(&agent.handoff_max_ns, 0);
	atomic_store(&agent.handoff_timeouts, 0);
	atomic_store(&agent.handoff_reroutes, 0);
	atomic_store(&agent.writer_idle, 0);
	atomic_store(&agent.unwind_cur, NULL);
	atomic_store(&agent.unwind_miss, 0);
	if (inherited) {
		memset(&agent.jit, 0, sizeof(agent.jit));
		memset(&agent.notes, 0, sizeof(agent.notes));
	}
	atomic_store(&agent.small_rings, 0);
	agent.code_seen = shm_alloc(CODE_SEEN_SIZE);
	agent.grave = shm_alloc(sizeof(struct graveyard));
	if (agent.cfg.mode == MODE_WALL) {
		/* The wall sampler's ring for idle threads' samples: made here,
		 * where the region's room is mapped first (shm.h). */
		struct tslot *ss = shm_alloc(sizeof(struct tslot));
		if (!ss || ring_init(&ss->ring, agent.cfg.ring_size * 2))
			return -1;
		ss->trigger_fd = ss->stat_fd = ss->helper_fd = ss->sig_fd = -1;
		for (int i = 0; i < EVENTS_MAX; i++)
			ss->counter_fd[i] = ss->helper_counter_fd[i] = -1;
		agent.sampler_slot = ss;
	}
	agent.objtab = NULL;
	if (agent.cfg.objects && objects_fresh())
		return -1;
	return agent.code_seen && agent.grave ? 0 : -1;
}

/* Bind the control socket and start the helper. */
static int start_helper(char *err, size_t errlen)
{
	char cerr[512] = "";
	int ctl = ctlsock_open(cerr, sizeof(cerr));
	if (ctl < 0 && cerr[0])
		agent_log("no control channel (%s); strata ctl and attaching will not work for process %d", cerr,
			  (int)getpid());
	int rc = link_spawn(ctl, err, errlen);
	/* Without a helper the process is not profiled: the region's
	 * descriptor does not stay open either. */
	if (rc)
		shm_close_fd(NULL);
	/* The helper serves the socket now; our copy would only keep it
	 * open after the helper is gone. */
	ctlsock_close();
	return rc;
}

/* Re-arms the triggers the profiled process owns (after a failed exec). */
static void rearm_own(int on)
{
	if (reg_lock_bounded())
		return;
	for (struct tslot *s = agent.slots; s; s = s->next)
		if (!atomic_load(&s->exited) && !s->external) {
			if (s->trigger_fd >= 0)
				trigger_fd_enable(s->trigger_fd, on, 1);
			if (s->has_timer)
				trigger_timer_arm(s, on);
		}
	reg_unlock();
}

/* After the first thread registered (a round trip to the helper in cpu
 * mode): the helper is up, or it left saying why (helper_why), which
 * becomes this process's own message and a note in the profile. */
static int helper_started(char *err, size_t errlen)
{
	if (link_triggers() == 0 || link_up())
		return 0;
	if (agent.helper_why[0])
		snprintf(err, errlen, "%s", agent.helper_why);
	else
		snprintf(err, errlen, "the agent's helper ended as it started");
	if (!atomic_load(&agent.helper_why_logged))
		agent_log("process %d: %s; it is not profiled", (int)getpid(), err);
	atomic_store(&agent.sampling, 0);
	agent.active = 0;
	if (agent.has_output && agent.cfg.output[0])
		note_not_profiled(agent.cfg.output, agent.python_version, err);
	return -1;
}

/* ---- fork ------------------------------------------------------------------ */

/* Closes a descriptor of ours the fork child inherited, if the number
 * still is a perf event (the program may have closed ours and reused the
 * number for something of its own). */
static void close_perf_fd(int fd)
{
	if (fd < 0)
		return;
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n > 0) {
		link[n] = 0;
		if (!strcmp(link, "anon_inode:[perf_event]"))
			close(fd);
	}
}

/* The state as it was when fork() was called, in private memory: the
 * child must not read the shared state, which the parent goes on
 * changing. A parent that forks and _exits at once (a daemon's double
 * fork, python-daemon's DaemonContext) had often marked itself stopping,
 * sampling off, by the time the child looked, and the child then went
 * unprofiled, and so did the daemon it forked in turn. */
static struct agent_state *fork_snap;

static void atfork_prepare(void)
{
	fork_snap = NULL;
	if (!agent.active || atomic_load(&agent.stopping))
		return;
	size_t sz = sizeof(struct agent_state);
	struct agent_state *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return;
	memcpy(m, agentp, sz);
	fork_snap = m;
}

static void atfork_parent(void)
{
	if (fork_snap)
		munmap(fork_snap, sizeof(struct agent_state));
	fork_snap = NULL;
}

/* A fork child where the region is mapped whole (no RLIMIT_AS) and a
 * helper serves the tree: the child stays in the region, with a state
 * of its own made from the parent's, and joins that helper (link.h)
 * instead of starting one: a pool of 64 workers adds no process. Returns
 * 1 when joined (or refused by the helper, which said why), 0 for the
 * child to make a region and a helper of its own. */
static int join_tree(const struct agent_state *copy, size_t sz)
{
	uint64_t key;
	/* Three quarters of the region in use (about 600 live workers: each
	 * takes ~5 MB of it, most never touched): a tree that big gives its
	 * next children regions of their own, and keeps the rest for the
	 * threads and tables of those it has. */
	if (!shm_full_map() || shm_tree(&key) <= 0 || shm_used() > shm_max() / 4 * 3)
		return 0;
	/* Until the helper serves us it cannot grow the region for us: the
	 * region's descriptor, from the helper, meanwhile. */
	if (link_tree_region())
		return 0;
	struct agent_state *st = shm_alloc(sz);
	if (!st)
		goto own;
	shm_set_owner(st, st);
	memcpy(st, copy, sz);
	agentp = st;
	if (state_fresh(1))
		goto drop;
	/* The child is a process of its own: its stream starts silent and
	 * becomes visible with its first sample. Whatever the parent
	 * attached (a session of its own) stays the parent's. */
	agent.stream_flags &= ~(uint32_t)PROC_CONTINUED;
	char cerr[512] = "", err[512];
	int ctl = ctlsock_open(cerr, sizeof(cerr));
	if (link_join(ctl, err, sizeof(err))) {
		ctlsock_close();
		if (getenv("STRATA_DEBUG_AGENTD"))
			agent_log("process %d: %s; starting a helper of its own", (int)getpid(), err);
		/* A helper that reads our request late (it was stopped)
		 * finds no process of that pid in the state, and refuses. */
		st->pid = 0;
		goto drop;
	}
	/* The helper grows the region from now on. */
	shm_close_fd(link_grow);
	if (ctl < 0 && cerr[0])
		agent_log("no control channel (%s); strata ctl and attaching will not work for process %d", cerr,
			  (int)getpid());
	ctlsock_close();
	if (agent.cfg.perf_map)
		jitdump_map();
	return 1;
drop:
	shm_free_owned(st);
own:
	shm_close_fd(NULL);
	return 0;
}

static void atfork_child(void)
{
	if (!fork_snap) {
		/* Nothing of ours continues in the child. */
		agentp = &inactive;
		link_forget();
		ctlsock_forget();
		return;
	}
	/* The region is shared with the parent: read what the child keeps,
	 * then replace it before writing anything. The parent's trigger
	 * descriptors were inherited: they are the parent's events, let go. */
	char name[64] = "";
	struct tslot *me = tls_slot;
	int had_slot = me != NULL;
	if (me)
		snprintf(name, sizeof(name), "%s", me->name);
	size_t sz = sizeof(struct agent_state);
	struct agent_state *copy = fork_snap;
	fork_snap = NULL;
	link_forget();
	ctlsock_forget();
	tls_slot = NULL;
	if (reg_lock_bounded()) {
		/* The parent's helper holds the list past the bound (stopped,
		 * or starved): the child does not wait for it. It runs
		 * unprofiled, and any perf event descriptors of the parent's
		 * threads (-e) stay open in it. */
		char why[160];
		snprintf(why, sizeof(why), "the parent's helper (pid %d) held the agent's thread list for over %lld s "
			 "(stopped or starved)", (int)atomic_load(&agent.helper_pid), REG_WAIT_NS / 1000000000);
		agentp = &inactive;
		agent_log("process %d: %s; it is not profiled", (int)getpid(), why);
		if (atomic_load(&copy->has_output) && copy->cfg.output[0])
			note_not_profiled(copy->cfg.output, copy->python_version, why);
		munmap(copy, sz);
		return;
	}
	for (struct tslot *s = agent.slots; s; s = s->next) {
		close_perf_fd(s->trigger_fd);
		for (uint32_t i = 1; i < s->ncounters && i < EVENTS_MAX; i++)
			close_perf_fd(s->counter_fd[i]);
	}
	reg_unlock();
	if (join_tree(copy, sz)) {
		munmap(copy, sz);
		if (had_slot)
			thread_register(name, 0);
		char err[512];
		helper_started(err, sizeof(err));
		return;
	}
	if (shm_replace() != 0) {
		agentp = &inactive;
		munmap(copy, sz);
		return;
	}
	struct agent_state *st = shm_alloc(sz);
	if (!st) {
		agentp = &inactive;
		munmap(copy, sz);
		return;
	}
	memcpy(st, copy, sz);
	munmap(copy, sz);
	shm_set_root(st);
	agentp = st;
	if (state_fresh(1)) {
		agentp = &inactive;
		return;
	}
	/* The child is a process of its own: its stream starts silent and
	 * becomes visible with its first sample. Whatever the parent
	 * attached (a session of its own) stays the parent's. */
	agent.stream_flags &= ~(uint32_t)PROC_CONTINUED;
	if (agent.cfg.perf_map)
		jitdump_map();
	char err[512];
	if (start_helper(err, sizeof(err))) {
		agent_log("process %d: %s; it is not profiled", (int)getpid(), err);
		agent.active = 0;
		if (agent.has_output && agent.cfg.output[0])
			note_not_profiled(agent.cfg.output, agent.python_version, err);
		return;
	}
	if (had_slot)
		thread_register(name, 0);
	helper_started(err, sizeof(err));
}

/* ---- ending ---------------------------------------------------------------- */

void agent_shutdown(int reason)
{
	/* In a vfork child the parent's memory is shared: touch nothing. */
	if (!agent.active || getpid() != agent.pid)
		return;
	if (atomic_exchange(&agent.stopping, 1))
		return;
	/* No more captures; our own events stop re-arming. The helper writes
	 * what the rings hold and the stream's end, and answers. It needs
	 * nothing this process holds, so the wait is short; it is bounded
	 * all the same, and a process that dies meanwhile is finished by the
	 * helper anyway. */
	atomic_store(&agent.sampling, 0);
	/* Our own events off now (the helper drops its copies too before it
	 * answers): after exec, an overflow signal would reach a program
	 * with no handler for it. Only if the list is free: this may run in
	 * a signal handler (_exit), where waiting for a lock is not allowed. */
	if (pthread_mutex_trylock(&agent.reg_lock) == 0) {
		for (struct tslot *s = agent.slots; s; s = s->next)
			if (!s->external && s->trigger_fd >= 0)
				trigger_fd_enable(s->trigger_fd, 0, 0);
		pthread_mutex_unlock(&agent.reg_lock);
	}
	/* The calling thread is the one that survives an exec, with its
	 * perf events: an event lives while any descriptor of it is open,
	 * and the helper may still hold a copy when the new image starts
	 * (it drops them when it answers, and the wait is bounded). An
	 * overflow then would send SIGPROF to a program whose disposition
	 * is back to the default: killed by SIGPROF (CPython's test_os spawn
	 * tests were, at times). Its signal is switched off at the source
	 * (O_ASYNC belongs to the open file, which the copies share), and
	 * its mappings go: they keep the event alive when the program has
	 * closed our descriptor (trigger_quiet_for_exec). */
	struct tslot *self = tls_slot;
	if (reason == END_EXEC && self)
		trigger_quiet_for_exec(self);
	/* The helper switches off the events it holds before it answers;
	 * unanswered (stopped, starved), the one it holds for this thread
	 * is switched off from here, or the new image dies of it. */
	if (link_finish(reason, 5000) != 0 && reason == END_EXEC && self)
		sample_quiet_helper_trigger(self);
}

/* exec() failed after agent_shutdown(END_EXEC): carry on in a new stream,
 * with a new helper (the old one ended the stream and left). */
void agent_resume(void)
{
	if (!agent.active || getpid() != agent.pid || !atomic_load(&agent.stopping))
		return;
	agent.stream = agent_new_stream_id();
	agent.stream_flags |= PROC_CONTINUED;
	agent.start_ns = mono_ns();
	char err[512];
	if (start_helper(err, sizeof(err))) {
		agent_log("process %d: %s; its profiling stops", (int)getpid(), err);
		agent.active = 0;
		return;
	}
	atomic_store(&agent.stopping, 0);
	struct tslot *self = tls_slot;
	if (self && self->trigger_fd >= 0 && (!self->ev_id[0] || trigger_is_ours(self, self->trigger_fd, 0))) {
		int fl = fcntl(self->trigger_fd, F_GETFL);
		if (fl >= 0)
			fcntl(self->trigger_fd, F_SETFL, fl | O_ASYNC);
	} else if (self && atomic_load(&self->ev_lost) == 2) {
		/* Its group went with its mapping before the exec (the
		 * program had closed the descriptor): the helper says so, in
		 * those terms. */
		atomic_store(&self->ev_lost, 3);
	}
	if (!agent.cfg.paused) {
		atomic_store(&agent.sampling, 1);
		rearm_own(1);
	}
	/* The old helper closed the threads' task-clock events: the new one
	 * opens them again (enabled if sampling is on). In every mode this
	 * waits until the new helper serves requests, its wall sampler
	 * running: the program goes on sampled. */
	link_triggers();
}

/* ---- setting up ------------------------------------------------------------ */

/* Brings the agent up in this process. With an output (STRATA_OUTPUT) it
 * records from the start; in standby it waits for `attach` on the control
 * channel. by_tid: loaded with dlopen. Returns 0, or -1 with a one-line
 * reason in err (also logged when `log` is set). */
static int agent_setup(const char *out, const char *options, int by_tid, int log, char *err, size_t errlen)
{
	signals_resolve();
	struct agent_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	parse_options(&cfg, options);
	if (out)
		snprintf(cfg.output, sizeof(cfg.output), "%s", out);

	const char *(*getversion)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
	if (!getversion) {
		snprintf(err, errlen, "not a Python process");
		return -1;
	}
	const char *v = getversion();
	size_t vl = strcspn(v, " ");
	char version[64];
	snprintf(version, sizeof(version), "%.*s", (int)vl, v);
	char dir[4096];
	find_agent_dir(dir, sizeof(dir));

	char tried[512], why[512] = "";
	int other_patch = 0;
	agent_py = load_pymodule(dir, version, tried, sizeof(tried), why, sizeof(why), &other_patch);
	if (!agent_py && why[0]) {
		snprintf(err, errlen, "%s", why);
		if (log)
			agent_log("%s", err);
		if (out && !by_tid) {
			snprintf(inactive.python_version, sizeof(inactive.python_version), "%s", version);
			note_unsupported(out, 1);
		}
		return -1;
	}
	if (!agent_py) {
		/* Name the interpreter to build for: this process's own. */
		char exe[512];
		ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (el > 0)
			exe[el] = 0;
		else
			snprintf(exe, sizeof(exe), "/path/to/python");
		unsigned maj = 0, min = 0;
		sscanf(version, "%u.%u", &maj, &min);
		if (maj != 3 || min < PY_MINOR_FIRST || min > PY_MINOR_LAST)
			snprintf(err, errlen, "Python %s is not supported (strata supports CPython 3.%d to 3.%d); "
				 "this process is not profiled",
				 version, PY_MINOR_FIRST, PY_MINOR_LAST);
		else
			snprintf(err, errlen, "no agent build for Python %s (this strata has builds for: %s); "
				 "this process is not profiled. Build one with: make PYTHONS=%s",
				 version, tried[0] ? tried : "none", exe);
		if (log)
			agent_log("%s", err);
		if (out && !by_tid) {
			snprintf(inactive.python_version, sizeof(inactive.python_version), "%s", version);
			note_unsupported(out, 0);
		}
		return -1;
	}

	uint64_t max = SHM_DEFAULT_MAX;
	const char *mx = getenv("STRATA_SHM_MAX_MB");
	if (mx && strtoull(mx, NULL, 10) >= 16)
		max = strtoull(mx, NULL, 10) << 20;
	if (shm_create(max)) {
		int e = errno;
		char lim[96];
		if (fd_limit_note(lim, sizeof(lim), e) == 0)
			shm_limit_note(lim, sizeof(lim), e);
		snprintf(err, errlen, "cannot set up the agent's shared memory: %s%s; this process is not profiled",
			 strerror(e), lim);
		goto fail;
	}
	struct agent_state *st = shm_alloc(sizeof(*st));
	if (!st) {
		snprintf(err, errlen, "out of memory; this process is not profiled");
		goto fail;
	}
	shm_set_root(st);
	agentp = st;
	agent.cfg = cfg;
	snprintf(agent.python_version, sizeof(agent.python_version), "%s", version);
	snprintf(agent.module_version, sizeof(agent.module_version), "%s", agent_py->built_for);
	snprintf(agent.agent_dir, sizeof(agent.agent_dir), "%s", dir);
	agent.standby = !out;
	agent.by_tid = by_tid;
	if (state_fresh(0)) {
		snprintf(err, errlen, "out of shared memory; this process is not profiled");
		goto fail;
	}
	agent_py->symbols(&agent.pysyms);
	unsigned vmaj = 0, vmin = 0;
	sscanf(version, "%u.%u", &vmaj, &vmin);
	if (other_patch && vmaj == 3 && vmin < 13 && layout_arm()) {
		snprintf(err, errlen, "the agent module for Python %s cannot be checked against Python %s "
			 "(PySys_AddAuditHook failed); this process is not profiled", agent_py->built_for, version);
		goto fail;
	}
	agent.r_debug = (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "_r_debug");
	agent.vdso = getauxval(AT_SYSINFO_EHDR);
	agent_py->hook_code_death(code_death_wanted, code_death);
	if (agent.cfg.objects && objects_setup()) {
		agent_log("allocations cannot be sampled in this Python (no allocator API); --objects is off");
		agent.cfg.objects = 0;
	}
	agent.trigger = sampler_pick_trigger();
	if (agent.trigger < 0) {
		/* sampler_pick_trigger said why, on stderr. */
		snprintf(err, errlen, "the sampling events cannot be set up; this process is not profiled");
		goto fail;
	}
	if (signals_install()) {
		snprintf(err, errlen, "cannot install signal handlers; this process is not profiled");
		goto fail;
	}
	if (agent.cfg.native)
		agent.stream_flags |= PROC_NATIVE;
	if (agent.cfg.perf_map)
		jitdump_map();
	unwind_handler_init();
	/* Numba emits line tables (what `strata record --jit-lines` asks for). */
	const char *dbg = getenv("NUMBA_DEBUGINFO");
	if (dbg && atoi(dbg) > 0)
		agent.stream_flags |= PROC_JIT_LINES;
	/* In standby nothing is sampled until an output is attached, unless
	 * the helper is to send windows from the start (STRATA_SEND, or
	 * `strata record --send` without a file: docs/send.md). */
	const char *send = getenv("STRATA_SEND");
	if (agent.standby && !agent.cfg.send_dir[0] && !(send && *send && !by_tid))
		agent.cfg.paused = 1;
	atomic_store(&agent.sampling, !agent.cfg.paused);
	atomic_store(&agent.has_output, !agent.standby);
	agent.active = 1;
	if (start_helper(err, errlen)) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, "; this process is not profiled");
		agent.active = 0;
		goto fail;
	}
	static int atfork_done;
	if (!atfork_done) {
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
		atfork_done = 1;
	}
	if (by_tid)
		threads_register_existing();
	else
		thread_register("MainThread", 1);
	if (helper_started(err, errlen))
		return -1;
	/* Loaded from Python (the GIL is held): check now if need be. */
	if (by_tid && atomic_load(&agent.layout) == LAYOUT_PENDING) {
		layout_decide();
		if (atomic_load(&agent.layout) == LAYOUT_BAD) {
			snprintf(err, errlen, "%s", agent.layout_why);
			return -1;
		}
	}
	/* Loaded into a running process: hooks in if recording and the GIL
	 * is held (else from the pending call objects_setup queued). After
	 * the layout check: the hooks wait for it, and a program that raises
	 * no audit event would not get them later. */
	if (by_tid)
		objects_loaded();
	return 0;
fail:
	if (log)
		agent_log("process %d: %s", (int)getpid(), err);
	if (out && !by_tid)
		note_not_profiled(out, version, err);
	agentp = &inactive;
	shm_destroy();
	return -1;
}

__attribute__((constructor)) static void agent_init(void)
{
	signals_resolve();
	const char *out = getenv("STRATA_OUTPUT");
	if (out && !*out)
		out = NULL;
	/* STRATA_AGENT=1 without an output: standby, for services that are
	 * attached to later (docs/control.md); STRATA_SEND=URL too, whose
	 * helper sends windows of samples from the start (docs/send.md). */
	const char *sa = getenv("STRATA_AGENT");
	const char *send = getenv("STRATA_SEND");
	int standby = !out && ((sa && *sa && strcmp(sa, "0") != 0) || (send && *send));
	if (!out && !standby)
		return;
	char err[1024];
	agent_setup(out, getenv("STRATA_OPTIONS"), 0, 1, err, sizeof(err));
}

/* For the Python module in a process started without the agent: it loads
 * this library with dlopen and calls this with the GIL held. The agent comes
 * up in standby with threads registered by tid; `attach` starts recording.
 * Returns 0 (also when the agent is already up), or -1 with err filled. */
AGENT_EXPORT int strata_agent_load(const char *options, char *err, size_t errlen)
{
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	static int tried;
	pthread_mutex_lock(&once);
	int rc = 0;
	if (!agent.active) {
		if (tried) {
			snprintf(err, errlen, "the agent could not start in this process earlier");
			rc = -1;
		} else {
			tried = 1;
			rc = agent_setup(NULL, options, 1, 0, err, errlen);
		}
	}
	pthread_mutex_unlock(&once);
	return rc;
}

/* Names (or registers) the calling thread: the Python module calls it from
 * threads it starts while the agent is loaded by dlopen. */
AGENT_EXPORT int strata_agent_register_thread(const char *name)
{
	if (!agent.active || atomic_load(&agent.stopping))
		return -1;
	return thread_register_self(name) ? 0 : -1;
}

/* Names a thread found by a scan, before it is first written. */
AGENT_EXPORT int strata_agent_name_thread(int tid, const char *name)
{
	if (!agent.active || !name || reg_lock_bounded())
		return -1;
	struct tslot *s = agent.slots;
	for (; s; s = s->next)
		if (s->tid == tid && !atomic_load(&s->exited))
			break;
	if (s)
		thread_set_name(s, name);
	reg_unlock();
	return s ? 0 : -1;
}

__attribute__((destructor)) static void agent_fini(void) { agent_shutdown(END_EXIT); }

/*
 * agent.c — lifecycle of the in-process agent.
 *
 * libstrata-agent.so is preloaded (LD_PRELOAD) into every process that
 * `strata record` starts, Python or not. Its constructor decides whether
 * there is anything to do: the output must be configured (STRATA_OUTPUT),
 * or standby asked for (STRATA_AGENT=1: no output until one is attached
 * through the control channel), and the process must contain a CPython
 * (Py_GetVersion is exported by every python executable and libpython).
 * The Python module can also load it with dlopen (strata_agent_load). It then loads the module built
 * for that interpreter version, installs the signal handlers, registers the
 * main thread and starts the writer. Anything else (a shell, /bin/true, a
 * compiler started by a build) is left alone except that exec() and
 * posix_spawn() keep the variables that carry profiling to grandchildren.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent.h"
#include "jitdump.h"
#include "unwind.h"
#include "../common/format.h"

/* CPython minor versions src/agent/py/pyframes.c has accessors for (the
 * Makefile's SUPPORTED_MINORS): outside them, building cannot help. */
#define PY_MINOR_FIRST 8
#define PY_MINOR_LAST 15

struct agent agent = { .reg_lock = PTHREAD_MUTEX_INITIALIZER };
uint8_t *code_seen;

uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

unsigned agent_rate_hz(void)
{
	if (agent.trigger != TRIGGER_PERF_EVENT)
		return agent.cfg.rate_hz;
	/* Only a clock event has a rate; others sample every N occurrences. */
	const struct event_list *ev = &agent.cfg.events;
	uint64_t p = ev->n && (ev->ev[0].flags & EVS_CLOCK) ? agent.cfg.event_period : 0;
	return p ? (unsigned)(1000000000ull / p) : 0;
}

uint64_t agent_new_stream_id(void)
{
	uint64_t id = 0;
	if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
		id = mono_ns() ^ ((uint64_t)getpid() << 32);
	return id ? id : 1;
}

/* STRATA_OPTIONS: comma-separated key=value pairs written by `strata record`. */
static void parse_options(struct agent_config *c, const char *s)
{
	c->mode = MODE_CPU;
	c->rate_hz = 1000;
	c->max_depth = 512;
	c->ring_size = 1u << 18;
	c->flush_ms = 100;
	c->paused = 0;
	c->native = 0;
	c->perf_map = 0;
	c->native_depth = 512; /* 3.8-3.10 run 4-6 native frames per Python frame */
	c->native_compile = 0;
	c->native_compile_fixed = 0;
	memset(&c->events, 0, sizeof(c->events));
	c->event_period = 0;
	/* Events are '+'-separated here: commas separate the options. */
	char evlist[512] = "";
	while (s && *s) {
		char key[32], val[512];
		const char *eq = strchr(s, '='), *end = strchr(s, ',');
		if (!end)
			end = s + strlen(s);
		if (eq && eq < end && (size_t)(eq - s) < sizeof(key) && (size_t)(end - eq - 1) < sizeof(val)) {
			memcpy(key, s, (size_t)(eq - s));
			key[eq - s] = 0;
			memcpy(val, eq + 1, (size_t)(end - eq - 1));
			val[end - eq - 1] = 0;
			unsigned long v = strtoul(val, NULL, 10);
			if (!strcmp(key, "mode"))
				c->mode = !strcmp(val, "wall") ? MODE_WALL : MODE_CPU;
			else if (!strcmp(key, "rate") && v >= 1 && v <= 100000)
				c->rate_hz = (unsigned)v;
			else if (!strcmp(key, "depth") && v >= 1 && v <= 4096)
				c->max_depth = (unsigned)v;
			else if (!strcmp(key, "ring") && v >= 4096 && v <= (1ul << 28) && !(v & (v - 1)))
				c->ring_size = (uint32_t)v;
			else if (!strcmp(key, "flush") && v >= 5 && v <= 10000)
				c->flush_ms = (int)v;
			else if (!strcmp(key, "paused"))
				c->paused = v != 0;
			else if (!strcmp(key, "native"))
				c->native = v != 0;
			else if (!strcmp(key, "perfmap"))
				c->perf_map = v != 0;
			else if (!strcmp(key, "ndepth") && v >= 1 && v <= 1024)
				c->native_depth = (unsigned)v;
			else if (!strcmp(key, "ncompile") && v <= 1000000) {
				c->native_compile = (unsigned)v;
				c->native_compile_fixed = 1;
			} else if (!strcmp(key, "events"))
				snprintf(evlist, sizeof(evlist), "%s", val);
			else if (!strcmp(key, "period"))
				c->event_period = strtoull(val, NULL, 10);
		}
		s = *end ? end + 1 : end;
	}
	c->period_ns = 1000000000ull / c->rate_hz;
	if (evlist[0]) {
		char err[256];
		if (events_parse(evlist, '+', &c->events, err, sizeof(err))) {
			agent_log("%s; sampling by CPU time instead", err);
			c->events.n = 0;
		}
		else if (!c->event_period)
			c->event_period = event_default_period(&c->events.ev[0], c->rate_hz);
		else if (c->event_period < event_min_period(&c->events.ev[0]))
			c->event_period = event_min_period(&c->events.ev[0]);
	}
	/* A Python frame record is 16 bytes; the ring must hold many deep samples. */
	while (c->ring_size < 16u * (sizeof(struct rsample) + c->max_depth * sizeof(struct strata_pyframe) +
				     (c->native ? c->native_depth * 8u : 0)))
		c->ring_size *= 2;
}

/* Finds and loads strata-py-<version>.so next to this library: the exact
 * version first, else another build of the same X.Y (layouts do not change
 * within a minor release). */
static const struct strata_pyapi *load_pymodule(const char *version, char *tried, size_t tlen)
{
	Dl_info info;
	if (!dladdr((void *)&agent, &info) || !info.dli_fname)
		return NULL;
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", info.dli_fname);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(dir, sizeof(dir), ".");

	char path[4352];
	void *h = NULL;
	snprintf(path, sizeof(path), "%s/strata-py-%s.so", dir, version);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	tried[0] = 0;
	if (!h) {
		char minor[16];
		const char *d1 = strchr(version, '.');
		const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
		size_t ml = d2 ? (size_t)(d2 - version) : strlen(version);
		snprintf(minor, sizeof(minor), "%.*s.", (int)ml, version);
		DIR *dp = opendir(dir);
		struct dirent *e;
		size_t to = 0;
		while (dp && (e = readdir(dp))) {
			const char *n = e->d_name;
			if (strncmp(n, "strata-py-", 10) != 0)
				continue;
			size_t l = strlen(n);
			if (l > 13 && strcmp(n + l - 3, ".so") == 0 && to < tlen)
				to += (size_t)snprintf(tried + to, tlen - to, "%s%.*s", to ? ", " : "", (int)(l - 13), n + 10);
			if (!h && strncmp(n + 10, minor, strlen(minor)) == 0) {
				snprintf(path, sizeof(path), "%s/%s", dir, n);
				h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
			}
		}
		if (dp)
			closedir(dp);
	}
	if (!h)
		return NULL;
	strata_pyapi_init_fn init = (strata_pyapi_init_fn)dlsym(h, STRATA_PYAPI_INIT_SYM);
	static const struct strata_core core = { .safe_read = agent_safe_read };
	const struct strata_pyapi *api = init ? init(&core) : NULL;
	if (!api || api->api_version != STRATA_PYAPI_VERSION)
		return NULL;
	return api;
}

static void atfork_prepare(void)
{
	if (!agent.active)
		return;
	writer_lock_for_fork();
	pthread_mutex_lock(&agent.reg_lock);
}

static void atfork_parent(void)
{
	if (!agent.active)
		return;
	pthread_mutex_unlock(&agent.reg_lock);
	writer_unlock_after_fork();
}

static void atfork_child(void)
{
	if (!agent.active)
		return;
	pthread_mutex_init(&agent.reg_lock, NULL);
	agent.pid = getpid();
	agent.stream = agent_new_stream_id();
	agent.start_ns = mono_ns();
	agent.sampler_running = 0;
	if (atomic_load(&agent.stopping))
		return;
	for (int i = 0; i < AGENT_MAX_OWN; i++)
		atomic_store(&agent.own_tids[i], 0);
	threads_after_fork_child();
	writer_after_fork_child();
	sampler_start();
	control_after_fork_child();
}

/* Signals whose default action ends the process while a flush is running. */
static void termination_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGQUIT);
}

void agent_shutdown(int reason)
{
	/* In a vfork child the parent's memory is shared: touch nothing. */
	if (!agent.active || getpid() != agent.pid)
		return;
	if (atomic_exchange(&agent.stopping, 1))
		return;
	/* A SIGTERM landing on this thread mid-flush would kill the process
	 * with the stream unfinished (a pool worker leaving by os._exit just
	 * as the pool terminates it). Hold such signals until the end is
	 * written; the mask is restored because exec() would inherit it. */
	sigset_t term, old;
	termination_signals(&term);
	pthread_sigmask(SIG_BLOCK, &term, &old);
	control_stop();
	sampler_stop();
	triggers_set_enabled(0);
	writer_stop_and_flush(reason);
	atomic_store(&agent.finished, 1);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void agent_flush_before_death(int sig)
{
	(void)sig;
	if (!agent.active || getpid() != agent.pid)
		return;
	if (atomic_exchange(&agent.stopping, 1)) {
		/* Another thread is ending the stream (it blocks these
		 * signals, so it is not this one): let it finish. */
		struct timespec ts = { 0, 5 * 1000000L };
		for (int waited = 0; waited < 2000 && !atomic_load(&agent.finished); waited += 5)
			nanosleep(&ts, NULL);
		return;
	}
	atomic_store(&agent.sampling, 0);
	control_unlink_socket();
	/* Normally a few milliseconds; the bound only matters if the writer
	 * is stuck behind a lock this thread was interrupted holding. */
	writer_finish_urgent(2000);
	atomic_store(&agent.finished, 1);
}

/* exec() failed after agent_shutdown(END_EXEC): carry on in a new stream. */
void agent_resume(void)
{
	if (!agent.active || getpid() != agent.pid || !atomic_load(&agent.stopping))
		return;
	agent.stream = agent_new_stream_id();
	agent.stream_flags |= PROC_CONTINUED;
	atomic_store(&agent.finished, 0);
	atomic_store(&agent.stopping, 0);
	if (writer_resume() == 0) {
		sampler_start();
		control_start();
		if (!agent.cfg.paused)
			triggers_set_enabled(1);
	}
}

/* Brings the agent up in this process. With an output (STRATA_OUTPUT) it
 * records from the start; in standby it waits for `attach` on the control
 * channel. by_tid: loaded with dlopen (see threads.c). Returns 0, or -1
 * with a one-line reason in err (also logged when `log` is set). */
static int agent_setup(const char *out, const char *options, int by_tid, int log, char *err, size_t errlen)
{
	signals_resolve();
	if (out)
		snprintf(agent.cfg.output, sizeof(agent.cfg.output), "%s", out);
	agent.standby = !out;
	parse_options(&agent.cfg, options);
	if (by_tid && agent.cfg.mode == MODE_WALL) {
		snprintf(err, errlen, "wall mode needs the agent preloaded (LD_PRELOAD); use cpu mode");
		return -1;
	}

	const char *(*getversion)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
	if (!getversion) {
		snprintf(err, errlen, "not a Python process");
		return -1;
	}
	const char *v = getversion();
	size_t vl = strcspn(v, " ");
	snprintf(agent.python_version, sizeof(agent.python_version), "%.*s", (int)vl, v);

	agent.pid = getpid();
	agent.stream = agent_new_stream_id();
	agent.start_ns = mono_ns();
	agent.by_tid = by_tid;

	char tried[512];
	agent.py = load_pymodule(agent.python_version, tried, sizeof(tried));
	if (!agent.py) {
		/* Name the interpreter to build for: this process's own. */
		char exe[512];
		ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (el > 0)
			exe[el] = 0;
		else
			snprintf(exe, sizeof(exe), "/path/to/python");
		unsigned maj = 0, min = 0;
		sscanf(agent.python_version, "%u.%u", &maj, &min);
		if (maj != 3 || min < PY_MINOR_FIRST || min > PY_MINOR_LAST)
			snprintf(err, errlen, "Python %s is not supported (strata supports CPython 3.%d to 3.%d); "
				 "this process is not profiled",
				 agent.python_version, PY_MINOR_FIRST, PY_MINOR_LAST);
		else
			snprintf(err, errlen, "no agent build for Python %s (this strata has builds for: %s); "
				 "this process is not profiled. Build one with: make PYTHONS=%s",
				 agent.python_version, tried[0] ? tried : "none", exe);
		if (log)
			agent_log("%s", err);
		writer_note_unsupported();
		return -1;
	}
	code_seen = calloc(CODE_SEEN_SIZE, 1);
	if (!code_seen) {
		snprintf(err, errlen, "out of memory; this process is not profiled");
		goto fail;
	}
	agent.py->hook_code_death(writer_code_wanted, writer_code_died);
	agent.trigger = sampler_pick_trigger();
	if (agent.trigger < 0) {
		/* sampler_pick_trigger said why, on stderr. */
		snprintf(err, errlen, "the sampling events cannot be set up; this process is not profiled");
		return -1;
	}
	if (signals_install()) {
		snprintf(err, errlen, "cannot install signal handlers; this process is not profiled");
		goto fail;
	}
	if (agent.cfg.mode == MODE_WALL) {
		agent.sampler_slot = calloc(1, sizeof(struct tslot));
		if (!agent.sampler_slot || ring_init(&agent.sampler_slot->ring, agent.cfg.ring_size * 2)) {
			snprintf(err, errlen, "out of memory; this process is not profiled");
			goto fail;
		}
		agent.sampler_slot->trigger_fd = -1;
		agent.sampler_slot->stat_fd = -1;
	}
	if (agent.cfg.native) {
		/* Tables for everything loaded so far, before the first sample:
		 * the writer keeps them current from here on. */
		if (unwind_init() == 0) {
			agent.stream_flags |= PROC_NATIVE;
		} else {
			agent_log("cannot read the loaded modules; native stacks are off");
			agent.cfg.native = 0;
		}
	}
	/* Numba emits line tables (what `strata record --jit-lines` asks for). */
	const char *dbg = getenv("NUMBA_DEBUGINFO");
	if (dbg && atoi(dbg) > 0)
		agent.stream_flags |= PROC_JIT_LINES;
	if (agent.cfg.perf_map)
		jitdump_start(); /* says on stderr when it cannot */
	/* In standby nothing is sampled until an output is attached. */
	atomic_store(&agent.sampling, !agent.standby && !agent.cfg.paused);
	if (agent.standby)
		agent.cfg.paused = 1;
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	agent.active = 1;
	if (agent.standby ? writer_start_standby() : writer_start()) {
		agent.active = 0;
		if (agent.standby)
			snprintf(err, errlen, "cannot start the writer thread: %s; this process is not profiled",
				 strerror(errno));
		else
			snprintf(err, errlen, "cannot open the profile %s: %s; this process is not profiled",
				 agent.cfg.output, strerror(errno));
		goto fail;
	}
	if (!by_tid)
		thread_register("MainThread", 1);
	sampler_start();
	control_start();
	return 0;
fail:
	if (log)
		agent_log("%s", err);
	return -1;
}

__attribute__((constructor)) static void agent_init(void)
{
	signals_resolve();
	const char *out = getenv("STRATA_OUTPUT");
	if (out && !*out)
		out = NULL;
	/* STRATA_AGENT=1 without an output: standby, for services that are
	 * attached to later (docs/control.md). */
	const char *sa = getenv("STRATA_AGENT");
	int standby = !out && sa && *sa && strcmp(sa, "0") != 0;
	if (!out && !standby)
		return;
	agent.configured = 1;
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
	pthread_mutex_lock(&once);
	int rc = 0;
	if (!agent.active) {
		if (agent.py || agent.pid) {
			snprintf(err, errlen, "the agent could not start in this process earlier");
			rc = -1;
		} else {
			rc = agent_setup(NULL, options, 1, 0, err, errlen);
			if (rc == 0)
				threads_scan();
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
	if (!agent.active || !name)
		return -1;
	pthread_mutex_lock(&agent.reg_lock);
	struct tslot *s = agent.slots;
	for (; s; s = s->next)
		if (s->tid == tid && !atomic_load(&s->exited))
			break;
	if (s && !s->announced)
		snprintf(s->name, sizeof(s->name), "%s", name);
	pthread_mutex_unlock(&agent.reg_lock);
	return s ? 0 : -1;
}

__attribute__((destructor)) static void agent_fini(void) { agent_shutdown(END_EXIT); }

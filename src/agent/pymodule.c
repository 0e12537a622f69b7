/*
 * pymodule.c — the per-version module in the profiled process: finding
 * and loading strata-py-X.Y.Z.so for this interpreter, and the check on a
 * live frame that a module built for another patch release reads it
 * right; see pymodule.h.
 *
 * In the profiled process (libstrata-agent.so): loaded by the agent's
 * setup (agent.c), checked from an audit hook or the setup itself. Apart
 * from agent.c because which module may read this interpreter is a
 * question of its own, whose answer the rest of the agent and the helper
 * only read (agent.layout).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/agent.h"
#include "shm/link.h"
#include "pymodule.h"
#include "audit.h"

/* ---- loading --------------------------------------------------------------- */

/* Finds and loads strata-py-<version>.so next to this library: the exact
 * version first, else another build of the same X.Y (*other_patch set),
 * which must then pass the layout checks: the module's own against the
 * interpreter's _Py_DebugOffsets (3.13+, any module), or the core's on a
 * live frame (before 3.13; see "a module built for another patch release"). */
const struct strata_pyapi *load_pymodule(const char *dir, const char *version, char *tried, size_t tlen,
					 char *why, size_t whylen, int *other_patch)
{
	char path[4352];
	void *h = NULL;
	snprintf(path, sizeof(path), "%s/strata-py-%s.so", dir, version);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	tried[0] = 0;
	*other_patch = !h;
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
	/* A module is chosen by version number; a build with other layouts
	 * (free-threaded) has the same one. Refused before anything of the
	 * module touches the interpreter. */
	int (*check)(char *, size_t) = (int (*)(char *, size_t))dlsym(h, "strata_py_build_check");
	if (check && check(why, whylen) != 0)
		return NULL;
	strata_pyapi_init_fn init = (strata_pyapi_init_fn)dlsym(h, STRATA_PYAPI_INIT_SYM);
	static const struct strata_core core = { .safe_read = agent_safe_read };
	const struct strata_pyapi *api = init ? init(&core) : NULL;
	if (!api || api->api_version != STRATA_PYAPI_VERSION)
		return NULL;
	return api;
}

/* ---- a module built for another patch release (before 3.13) --------------- */

/*
 * Before 3.13 the interpreter publishes no table of its layout, and a
 * patch release may still change one. A module built for the exact version
 * needs no check; one built for another patch release of the same minor
 * version is checked on a live frame before anything it reads is written:
 * with the GIL held, the innermost Python frame the module's own walk
 * finds (the handler's path: the thread-state key, the frame chain, the
 * code object, its first line and current instruction) must be the one
 * CPython's C API reports, and the code object read through the module
 * (the writer's path) must carry the same name and first line.
 *
 * The agent's constructor runs before Py_Initialize, so the check waits
 * for a moment with a Python frame and the GIL: an audit hook
 * (PySys_AddAuditHook may be called before Py_Initialize), called on
 * every audit event with the GIL held, decides at the first one raised
 * from Python code (the imports of start-up) and is a load and a branch
 * afterwards. Meanwhile samples wait in the rings (the helper writes
 * nothing while agent.layout is LAYOUT_PENDING), code-object deaths and
 * thread names are not taken from the module. A process that ends
 * undecided is refused by the helper (writer.c).
 */
static int layout_busy;

/* 1 checked, 0 no Python frame here yet, -1 the module misreads (why). */
static int layout_verify(char *why, size_t n)
{
	struct strata_pyframe api, fr[1];
	char name[256];
	struct tslot *s = tls_slot;
	if (!s || agent_py->api_frame(&api, name, sizeof(name)))
		return 0;
	/* The walk as the handler does it, under the fault guard, with the
	 * sampling signal held so that no capture reuses the guard. */
	sigset_t prof, old;
	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	pthread_sigmask(SIG_BLOCK, &prof, &old);
	volatile int got = 0;
	uint32_t missing = 0;
	if (sigsetjmp(s->guard_jb, 0) == 0) {
		s->guard_on = 1;
		void *ts = agent_py->ready() ? agent_py->current_tstate() : NULL;
		got = ts ? agent_py->walk(ts, fr, 1, &missing, NULL) : 0;
		s->guard_on = 0;
	} else {
		got = -1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	struct strata_codeinfo ci;
	memset(&ci, 0, sizeof(ci));
	int ok = got == 1 && fr[0].code == api.code && fr[0].first == api.first && fr[0].lasti == api.lasti &&
		 agent_py->read_code(fr[0].code, &ci) == 0 && ci.name && !strcmp(ci.name, name) &&
		 (uint16_t)ci.firstlineno == api.first;
	free(ci.filename);
	free(ci.name);
	free(ci.qualname);
	free(ci.linetable);
	if (ok)
		return 1;
	char exe[512];
	ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[el > 0 ? el : 0] = 0;
	snprintf(why, n, "the agent module for Python %s does not read Python %s right: CPython's current "
		 "frame runs %.200s (line %u, instruction %d), the module %s; this process is not profiled. "
		 "Build a module for this interpreter with: make PYTHONS=%.400s",
		 agent_py->built_for, agent.python_version, name, (unsigned)api.first, (int)api.lasti,
		 got == 1 ? (fr[0].code == api.code ? "reads another line or instruction of it" : "finds another code object")
			  : got < 0 ? "faults" : "finds no frame",
		 exe);
	return -1;
}

/* Runs the check if it is still to be done; with the GIL held. */
void layout_decide(void)
{
	if (atomic_load_explicit(&agent.layout, memory_order_acquire) != LAYOUT_PENDING || layout_busy)
		return;
	layout_busy = 1; /* the C API calls may raise audit events of their own */
	char why[sizeof(agent.layout_why)];
	int v = layout_verify(why, sizeof(why));
	layout_busy = 0;
	if (v > 0) {
		atomic_store(&agent.layout, LAYOUT_OK);
		link_poke();
	} else if (v < 0) {
		/* Nothing was written yet: stop, say so, and leave the record
		 * of a process that was not profiled in the helper's place. */
		atomic_store(&agent.sampling, 0);
		atomic_store(&agent.has_output, 0);
		snprintf(agent.layout_why, sizeof(agent.layout_why), "%s", why);
		atomic_store(&agent.layout, LAYOUT_BAD);
		agent_log("%s", why);
		if (!agent.standby && !agent.by_tid) {
			char exe[4096];
			ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
			exe[el > 0 ? el : 0] = 0;
			agent_note_unsupported(agent.cfg.output, getpid(), getppid(), agent.python_version, exe, 1);
		}
		link_poke();
	}
}

static int layout_audit(const char *event, void *args, void *data)
{
	(void)args;
	(void)data;
	audit_event(event);
	if (atomic_load_explicit(&agent.layout, memory_order_relaxed) == LAYOUT_PENDING)
		layout_decide();
	return 0;
}

/* Arms the check; -1 if it cannot be (the module is then refused). */
int layout_arm(void)
{
	if (!dlsym(RTLD_DEFAULT, "PySys_AddAuditHook"))
		return -1;
	atomic_store(&agent.layout, LAYOUT_PENDING);
	return audit_add(layout_audit, NULL);
}

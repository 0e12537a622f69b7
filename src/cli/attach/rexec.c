/*
 * rexec.c — see rexec.h.
 *
 * The request is one thread state's: the thread holding the GIL when the
 * process is held (it is running Python), else the main thread's. Only
 * that thread can run the script, once; so strata always knows whether
 * it ran: with the process held, a pending flag still set means it did
 * not, and clearing it withdraws the request (nothing is left to run
 * later, when the script would be gone). A flag the interpreter cleared
 * means it took the request: the script's first act is to rename a
 * "claim" file, after which its text has been read and the directory may
 * go; until then it stays.
 */
#include "rexec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptstop.h"

#define SCRIPT_WAIT_TAKEN_MS 10000
/* A process none of whose threads ran at all for this long (all blocked:
 * reading, waiting) cannot take the request until something wakes it:
 * ptrace is tried then instead of waiting out the timeout. */
#define ALL_BLOCKED_MS 300

static double ms_since(uint64_t t0) { return (double)(ptstop_now_ns() - t0) / 1e6; }

/* How much the threads of pid have run: the sum of their run times
 * (schedstat, ns), or of their context switches where the kernel keeps no
 * schedstat. Grows whenever any thread runs. */
static uint64_t activity(pid_t pid)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	uint64_t sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char buf[2048];
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/schedstat", (int)pid, e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n > 0) {
			buf[n] = 0;
			sum += strtoull(buf, NULL, 10);
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)pid, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		buf[n > 0 ? n : 0] = 0;
		for (char *l = strstr(buf, "ctxt_switches:"); l; l = strstr(l + 1, "ctxt_switches:"))
			sum += strtoull(l + 14, NULL, 10);
	}
	closedir(d);
	return sum;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* s as a Python bytes literal, every byte escaped: no quoting to get
 * wrong, whatever the path holds. */
static void pybytes(FILE *f, const char *s)
{
	fputs("b'", f);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		fprintf(f, "\\x%02x", *c);
	fputc('\'', f);
}

/* The script. It runs in the target with the GIL held, in a namespace of
 * its own (PEP 768 runs it with PyRun_String in a fresh dict). It must
 * not raise: what it cannot do it writes into the result. */
static const char script_text[] =
	"def _strata_attach(claim, result, agent, options):\n"
	"    import sys\n"
	"    busy = []\n"
	"    for n, m in list(sys.modules.items()):\n"
	"        try:\n"
	"            if getattr(getattr(m, '__spec__', None), '_initializing', False) is True:\n"
	"                busy.append(n)\n"
	"        except Exception:\n"
	"            pass\n"
	"    if busy:\n"
	"        import posix\n"
	"        try:\n"
	"            posix.rename(claim, claim + b'.taken')\n"
	"            fd = posix.open(result + b'.new', posix.O_WRONLY | posix.O_CREAT | posix.O_EXCL, 0o600)\n"
	"            try:\n"
	"                posix.write(fd, b'busy: ' + str(busy[0]).encode('utf-8', 'replace')[:200])\n"
	"            finally:\n"
	"                posix.close(fd)\n"
	"            posix.rename(result + b'.new', result)\n"
	"        except OSError:\n"
	"            pass\n"
	"        return\n"
	"    modules = dict(sys.modules)\n"
	"    importers = dict(sys.path_importer_cache)\n"
	"    was_switch = sys.getswitchinterval()\n"
	"    sys.setswitchinterval(min(was_switch, 0.0001))\n"
	"    switch = sys.getswitchinterval()\n"
	"    try:\n"
	"        import os\n"
	"        try:\n"
	"            os.rename(claim, claim + b'.taken')\n"
	"        except OSError:\n"
	"            return\n"
	"        try:\n"
	"            import ctypes\n"
	"            lib = ctypes.CDLL(os.fsdecode(agent))\n"
	"            load = lib.strata_agent_load\n"
	"            load.restype = ctypes.c_int\n"
	"            load.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t)\n"
	"            buf = ctypes.create_string_buffer(1024)\n"
	"            if load(options, buf, len(buf)) != 0:\n"
	"                out = b'agent: ' + buf.value\n"
	"            else:\n"
	"                out = b'ok'\n"
	"                try:\n"
	"                    threading = modules.get('threading')\n"
	"                    name = lib.strata_agent_name_thread\n"
	"                    name.restype = ctypes.c_int\n"
	"                    name.argtypes = (ctypes.c_int, ctypes.c_char_p)\n"
	"                    for t in list(getattr(threading, '_active', {}).values()):\n"
	"                        if getattr(t, 'native_id', None):\n"
	"                            name(t.native_id, str(t.name).encode('utf-8', 'replace')[:63])\n"
	"                except Exception:\n"
	"                    pass\n"
	"        except Exception as e:\n"
	"            out = ('python: %s: %s' % (type(e).__name__, e)).encode('utf-8', 'replace')\n"
	"        fd = os.open(result + b'.new', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)\n"
	"        try:\n"
	"            os.write(fd, out)\n"
	"        finally:\n"
	"            os.close(fd)\n"
	"        os.rename(result + b'.new', result)\n"
	"    except Exception:\n"
	"        pass\n"
	"    finally:\n"
	"        if sys.getswitchinterval() == switch:\n"
	"            sys.setswitchinterval(was_switch)\n"
	"        for d, was in ((sys.modules, modules), (sys.path_importer_cache, importers)):\n"
	"            for k in [k for k in d if k not in was]:\n"
	"                del d[k]\n"
	"            for k, v in was.items():\n"
	"                if d.get(k) is not v:\n"
	"                    d[k] = v\n";

struct files {
	char dir[256], script[300], claim[300], taken[300], result[300], result_new[300];
};

static void cleanup(struct files *f)
{
	unlink(f->script);
	unlink(f->claim);
	unlink(f->taken);
	unlink(f->result);
	unlink(f->result_new);
	rmdir(f->dir);
}

static int make_files(struct files *f, pid_t pid, const char *agent, const char *options, char *err, size_t errlen)
{
	const char *td = getenv("TMPDIR");
	snprintf(f->dir, sizeof(f->dir), "%s/strata-attach-XXXXXX", td && *td && strlen(td) < 128 ? td : "/tmp");
	if (!mkdtemp(f->dir)) {
		snprintf(err, errlen, "cannot make a directory for the script: %s", strerror(errno));
		return -1;
	}
	snprintf(f->script, sizeof(f->script), "%s/load.py", f->dir);
	snprintf(f->claim, sizeof(f->claim), "%s/claim", f->dir);
	snprintf(f->taken, sizeof(f->taken), "%s/claim.taken", f->dir);
	snprintf(f->result, sizeof(f->result), "%s/result", f->dir);
	snprintf(f->result_new, sizeof(f->result_new), "%s/result.new", f->dir);
	FILE *s = fopen(f->script, "we");
	int fd = open(f->claim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	if (!s || fd < 0) {
		snprintf(err, errlen, "cannot write the script in %s: %s", f->dir, strerror(errno));
		if (s)
			fclose(s);
		cleanup(f);
		return -1;
	}
	fputs(script_text, s);
	fputs("_strata_attach(", s);
	pybytes(s, f->claim);
	fputs(", ", s);
	pybytes(s, f->result);
	fputs(", ", s);
	pybytes(s, agent);
	fputs(", ", s);
	pybytes(s, options);
	fputs(")\n", s);
	if (fclose(s)) {
		snprintf(err, errlen, "cannot write the script in %s: %s", f->dir, strerror(errno));
		cleanup(f);
		return -1;
	}
	/* The process must open the same file by the same name: not so
	 * with a /tmp of its own (another mount namespace, PrivateTmp). */
	char seen[400];
	struct stat a, b;
	snprintf(seen, sizeof(seen), "/proc/%d/root%s", (int)pid, f->script);
	if (stat(f->script, &a) || stat(seen, &b) || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		snprintf(err, errlen, "the process does not see %s (a /tmp of its own?)", f->dir);
		cleanup(f);
		return -1;
	}
	return 0;
}

/* With the process held: the thread state to ask, and where its request
 * goes. 0, or -1 with err. */
static int pick(struct pyproc *p, struct strata_rexec *rx, char *err, size_t errlen)
{
	struct strata_pythread t[256];
	int n = p->reader->threads(t, 256);
	if (n <= 0) {
		snprintf(err, errlen, "no Python thread state could be read");
		return -1;
	}
	int k = -1;
	for (int i = 0; i < n && k < 0; i++)
		if (t[i].holds_gil)
			k = i;
	for (int i = 0; i < n && k < 0; i++)
		if ((pid_t)t[i].native_id == p->pid)
			k = i;
	if (k < 0)
		k = n - 1; /* the list is newest first: the oldest is the main thread's */
	char why[256];
	if (p->reader->remote_exec(t[k].tstate, rx, why, sizeof(why))) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	if (!rx->enabled) {
		snprintf(err, errlen, "remote debugging is turned off in it (-X disable-remote-debug or "
			 "PYTHON_DISABLE_REMOTE_DEBUG)");
		return -1;
	}
	return 0;
}

/* The interpreter runs a request at its first safe point, and it has
 * safe points during its own start-up too, while importlib is half made:
 * there it cannot even open the script, and it prints a traceback into
 * the program's stderr ("Can't open debugger script ...: NameError: name
 * 'sys' is not defined"). So the request is made once Py_Initialize has
 * finished (the runtime's `initialized`), waiting at most timeout_ms for
 * it. 0 ready; 1 not (err says why: ptrace may be tried). */
static int wait_initialized(struct pyproc *p, int timeout_ms, char *err, size_t errlen)
{
	uint64_t t0 = ptstop_now_ns();
	int ph;
	while ((ph = p->reader->phase()) != STRATA_PHASE_RUNNING) {
		if (ph == STRATA_PHASE_FINALIZING) {
			snprintf(err, errlen, "its interpreter is finalizing (the program is ending)");
			return 1;
		}
		if (ms_since(t0) >= timeout_ms) {
			snprintf(err, errlen, "its interpreter had not finished starting after %.1f s",
				 timeout_ms / 1000.0);
			return 1;
		}
		sleep_ms(5);
	}
	return 0;
}

/* The request, written with the process held. */
static int post(struct pyproc *p, const struct strata_rexec *rx, const char *path, char *err, size_t errlen)
{
	int32_t pending = 0;
	uint64_t breaker = 0;
	size_t len = strlen(path) + 1;
	if (len > rx->script_path_size || len > 4096) {
		snprintf(err, errlen, "the script's path is too long for the interpreter (%zu bytes)", len);
		return -1;
	}
	if (pyproc_read(p, &pending, rx->pending_call, sizeof(pending)) ||
	    pyproc_read(p, &breaker, rx->eval_breaker, sizeof(breaker))) {
		snprintf(err, errlen, "cannot read its thread state");
		return -1;
	}
	if (pending) {
		snprintf(err, errlen, "another remote debugger's request is pending in it");
		return -1;
	}
	breaker |= rx->stop_bit;
	pending = 1;
	if (pyproc_write(p, rx->script_path, path, len) || pyproc_write(p, rx->pending_call, &pending, sizeof(pending)) ||
	    pyproc_write(p, rx->eval_breaker, &breaker, sizeof(breaker))) {
		/* Withdrawn if it got as far as the flag. */
		pending = 0;
		pyproc_write(p, rx->pending_call, &pending, sizeof(pending));
		snprintf(err, errlen, "cannot write into its memory: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The script's result, if it has written one: 1 (in buf), else 0. */
static int result(struct files *f, char *buf, size_t n)
{
	int fd = open(f->result, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	buf[r > 0 ? r : 0] = 0;
	return 1;
}

/* One request: as rexec_agent, or 2 when the script found the program
 * importing a module (err names it) and did nothing else. */
static int rexec_once(struct pyproc *p, const char *agent, const char *options, int timeout_ms, double *wait_ms,
		      char *err, size_t errlen)
{
	struct files f;
	if (make_files(&f, p->pid, agent, options, err, errlen))
		return 1;
	struct ptstop ps;
	struct strata_rexec rx;
	char e2[512];
	if (ptstop_all(&ps, p->pid, 500, e2, sizeof(e2))) {
		snprintf(err, errlen, "%s", e2);
		cleanup(&f);
		return -1;
	}
	int rc = pick(p, &rx, err, errlen) || post(p, &rx, f.script, err, errlen);
	ptstop_release(&ps);
	if (rc) {
		cleanup(&f);
		return 1;
	}
	uint64_t t0 = ptstop_now_ns();
	char out[1200];
	int got = 0, blocked = 0, polls = 0;
	uint64_t act = activity(p->pid), act_ns = t0;
	while (!(got = result(&f, out, sizeof(out))) && ms_since(t0) < timeout_ms && access(f.taken, F_OK) != 0) {
		sleep_ms(5);
		if (++polls % 10)
			continue;
		uint64_t a = activity(p->pid);
		if (a != act) {
			act = a;
			act_ns = ptstop_now_ns();
		} else if (ms_since(act_ns) >= ALL_BLOCKED_MS) {
			blocked = 1;
			break;
		}
	}
	if (!got && access(f.taken, F_OK) != 0) {
		/* Not taken yet: withdrawn, unless it is taken meanwhile. */
		if (ptstop_all(&ps, p->pid, 500, e2, sizeof(e2)) == 0) {
			int32_t pending = 0;
			if (pyproc_read(p, &pending, rx.pending_call, sizeof(pending)) == 0 && pending == 1) {
				pending = 0;
				pyproc_write(p, rx.pending_call, &pending, sizeof(pending));
				ptstop_release(&ps);
				cleanup(&f);
				if (blocked)
					snprintf(err, errlen, "no thread ran Python bytecode within %.1f s (all its threads "
						 "were blocked)", ms_since(t0) / 1000.0);
				else
					snprintf(err, errlen, "no thread ran Python bytecode within %.1f s (stuck in C, "
						 "or blocked)", timeout_ms / 1000.0);
				return 1;
			}
			ptstop_release(&ps);
		}
	}
	/* Taken: its text was read once the claim is renamed; then it
	 * runs to its result. */
	while (!got && ms_since(t0) < timeout_ms + SCRIPT_WAIT_TAKEN_MS) {
		sleep_ms(5);
		got = result(&f, out, sizeof(out));
	}
	*wait_ms = ms_since(t0);
	if (!got) {
		if (access(f.taken, F_OK) == 0)
			cleanup(&f);
		snprintf(err, errlen, "the interpreter took strata's loading script (PEP 768) but it has not finished "
			 "after %.0f s; the agent may still come up: see 'strata ctl %d status'", *wait_ms / 1000.0,
			 (int)p->pid);
		return -1;
	}
	cleanup(&f);
	size_t l = strlen(out);
	while (l && (out[l - 1] == '\n' || out[l - 1] == ' '))
		out[--l] = 0;
	if (!strcmp(out, "ok"))
		return 0;
	if (!strncmp(out, "agent: ", 7)) {
		snprintf(err, errlen, "the agent did not start in process %d: %s", (int)p->pid, out + 7);
		return -1;
	}
	if (!strncmp(out, "busy: ", 6)) {
		snprintf(err, errlen, "%s", out + 6);
		return 2;
	}
	snprintf(err, errlen, "the loading script failed in it: %s", !strncmp(out, "python: ", 8) ? out + 8 : out);
	return 1;
}

/* The script runs wherever the thread is, in the middle of an import too,
 * where a module it needs (os, what ctypes imports) may be half made: it
 * then says so and does nothing, and the request is made again a moment
 * later, for as long as timeout_ms allows (then ptrace is tried). */
#define BUSY_RETRY_MS 20

int rexec_agent(struct pyproc *p, const char *agent, const char *options, int timeout_ms, double *wait_ms, char *err,
		size_t errlen)
{
	*wait_ms = 0;
	if (!p->reader->remote_exec) {
		snprintf(err, errlen, "its reader has no PEP 768 support");
		return 1;
	}
	if (wait_initialized(p, timeout_ms, err, errlen))
		return 1;
	uint64_t t0 = ptstop_now_ns();
	for (;;) {
		int r = rexec_once(p, agent, options, timeout_ms, wait_ms, err, errlen);
		*wait_ms = ms_since(t0);
		if (r != 2)
			return r;
		if (ms_since(t0) >= timeout_ms) {
			char mod[256];
			snprintf(mod, sizeof(mod), "%s", err);
			snprintf(err, errlen, "it was importing modules (%s) for %.1f s", mod, ms_since(t0) / 1000.0);
			return 1;
		}
		sleep_ms(BUSY_RETRY_MS);
	}
}

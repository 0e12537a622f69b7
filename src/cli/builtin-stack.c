/*
 * builtin-stack.c — `strata stack PID`: the Python stack of every thread of
 * a running CPython process, now, read from outside (docs/stack.md).
 *
 * Nothing is loaded into the process and nothing in it runs on our behalf:
 * its memory is read through /proc/PID/mem by the reader module built for
 * its Python version (strata-pyreader-X.Y.Z.so, the one the agent's helper
 * uses), so a process stuck in C, holding the GIL or deadlocked, shows
 * where it is. The threads are held still with ptrace while they are read
 * (ptstop.h: no signal is sent or lost) unless --nonblocking asks to read
 * them running, which is faster for the target and may show a torn stack.
 * A process running asyncio also shows every pending task's await chain
 * (stack-tasks.c).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "builtin.h"
#include "cli/attach/ptstop.h"
#include "cli/attach/pyproc.h"
#include "cli/attach/stack-native.h"
#include "cli/attach/stack-tasks.h"
#include "common/procstat.h"
#include "common/format.h"
#include "lib/json.h"
#include "lib/linetable.h"

#define MAX_FRAMES 512
#define MAX_PYTHREADS 4096

static const char usage_text[] =
	"usage: strata stack [options] PID\n"
	"\n"
	"Prints the current Python stack of every thread of running CPython process\n"
	"PID (3.8 or later), loading nothing into it: for a process that is stuck,\n"
	"slow or deadlocked. Frames are listed as in a traceback: most recent call\n"
	"last. The process is paused (ptrace) only while its memory is read.\n"
	"A process running asyncio also shows every pending task: its coroutines\n"
	"(the await chain it is suspended in) under the task that awaits it.\n"
	"\n"
	"options:\n"
	"  --nonblocking    read the process while it runs: no pause at all, but a\n"
	"                   thread that is running may show a torn or partial stack\n"
	"  --native         C/C++ frames too, merged with the Python frames (each\n"
	"                   eval-loop activation replaced by the Python frames it runs)\n"
	"  --json           one JSON document (threads and tasks, frames outermost\n"
	"                   first)\n"
	"  -h, --help       this help\n"
	"\n"
	"Needs the right to trace PID: its own user (or root), and a Yama\n"
	"ptrace_scope that allows it (docs/stack.md).\n";

struct code {
	uint64_t addr;
	int ok;
	struct strata_codeinfo ci;
	struct linetable lt;
};

struct sthread {
	pid_t tid;
	char comm[64];
	char state;             /* from /proc/PID/task/TID/stat before the pause */
	int held;               /* paused while read */
	int py;                 /* has a Python thread state */
	int gil;
	uint64_t pthread;
	int n;
	uint32_t missing;
	int fault;              /* the walk failed (a torn read with --nonblocking) */
	struct strata_pyframe fr[MAX_FRAMES];
	int npcs, complete;     /* --native: the native stack, leaf first */
	uint64_t pcs[MAX_FRAMES];
};

static struct stack_native *SN;

static struct {
	struct code *codes;
	size_t ncodes, capcodes;
} C;

static struct code *code_get(struct pyproc *p, uint64_t addr)
{
	for (size_t i = 0; i < C.ncodes; i++)
		if (C.codes[i].addr == addr)
			return &C.codes[i];
	if (C.ncodes == C.capcodes) {
		size_t cap = C.capcodes ? C.capcodes * 2 : 64;
		struct code *n = realloc(C.codes, cap * sizeof(*n));
		if (!n)
			return NULL;
		C.codes = n;
		C.capcodes = cap;
	}
	struct code *c = &C.codes[C.ncodes++];
	memset(c, 0, sizeof(*c));
	c->addr = addr;
	c->ok = p->reader->read_code(addr, &c->ci) == 0;
	return c;
}

/* Line tables and pre-3.11 qualified names: after the process is let go
 * (they come from the copies already read, and from source files). */
static void code_finish(struct pyproc *p)
{
	for (size_t i = 0; i < C.ncodes; i++) {
		struct code *c = &C.codes[i];
		if (!c->ok)
			continue;
		if (!c->ci.qualname && p->reader->qualname)
			c->ci.qualname = p->reader->qualname(c->ci.filename, c->ci.firstlineno, c->ci.name);
		linetable_decode(&c->lt, p->reader->linetable_fmt, c->ci.linetable, c->ci.linetable_len,
				 c->ci.firstlineno);
	}
}

static void read_comm(pid_t pid, struct sthread *t)
{
	char path[80], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, (int)t->tid);
	FILE *f = fopen(path, "re");
	t->comm[0] = 0;
	if (f) {
		if (fgets(t->comm, sizeof(t->comm), f))
			t->comm[strcspn(t->comm, "\n")] = 0;
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)t->tid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	const char *state = rp ? procstat_field(rp, 3) : NULL;
	t->state = state ? *state : '?';
}

static int tid_cmp(const void *a, const void *b)
{
	const struct sthread *x = a, *y = b;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Where glibc keeps a thread's kernel id in its struct pthread (whose
 * address is the pthread_t): found in our own, the same glibc as the
 * target's on this machine. Used before 3.11, whose thread states do not
 * record the kernel id, when the registers (fs_base) are not at hand. */
static long glibc_tid_offset(void)
{
	pid_t me = (pid_t)syscall(SYS_gettid);
	const char *self = (const char *)pthread_self();
	for (long off = 0; off < 2048; off += 4)
		if (*(const pid_t *)(self + off) == me)
			return off;
	return -1;
}

static const char *state_name(char s)
{
	switch (s) {
	case 'R':
		return "running";
	case 'S':
		return "sleeping";
	case 'D':
		return "in uninterruptible sleep";
	case 'T':
		return "stopped";
	case 't':
		return "being traced";
	default:
		return "unknown state";
	}
}

/* A source line, without its indentation, or NULL. A relative file name
 * (3.8's co_filename for the script) is the target's: from its directory. */
static char *source_line(pid_t pid, const char *file, int line)
{
	if (!file || line <= 0 || file[0] == '<')
		return NULL;
	char rel[4400];
	if (file[0] != '/') {
		snprintf(rel, sizeof(rel), "/proc/%d/cwd/%s", (int)pid, file);
		file = rel;
	}
	FILE *f = fopen(file, "re");
	if (!f)
		return NULL;
	char buf[1024];
	char *got = NULL;
	for (int i = 1; fgets(buf, sizeof(buf), f); i++) {
		size_t l = strlen(buf);
		int whole = l && buf[l - 1] == '\n';
		if (i == line) {
			buf[strcspn(buf, "\r\n")] = 0;
			char *s = buf + strspn(buf, " \t");
			got = *s ? strdup(s) : NULL;
			break;
		}
		/* A line longer than the buffer: skip its rest. */
		while (!whole && fgets(buf, sizeof(buf), f)) {
			l = strlen(buf);
			whole = l && buf[l - 1] == '\n';
		}
	}
	fclose(f);
	return got;
}

struct fview {
	const char *func, *file;
	int line;
	int entry;
};

static void frame_view(struct pyproc *p, const struct strata_pyframe *f, struct fview *v)
{
	struct code *c = code_get(p, f->code);
	v->entry = (f->flags & PYF_ENTRY) != 0;
	if (!c || !c->ok) {
		v->func = "[code object unreadable]";
		v->file = NULL;
		v->line = -1;
		return;
	}
	v->func = c->ci.qualname ? c->ci.qualname : c->ci.name;
	v->file = c->ci.filename;
	v->line = linetable_line(&c->lt, f->lasti);
}

static void task_frame_view(struct pyproc *p, const struct strata_pyframe *f, struct stask_view *tv)
{
	struct fview v;
	frame_view(p, f, &v);
	tv->func = v.func;
	tv->file = v.file;
	tv->line = v.line;
}

/* --native: the thread's merged stack (leaf first) in *out; count. */
static int merged(struct sthread *t, struct snframe **out)
{
	*out = NULL;
	if (!SN)
		return 0;
	*out = calloc((size_t)t->n + 2 * (size_t)t->npcs + 1, sizeof(**out));
	if (!*out)
		return 0;
	return stack_native_merge(SN, t->pcs, t->npcs, t->complete, t->fr, t->n, *out);
}

static void print_text(struct pyproc *p, struct sthread *th, int n, double pause_ms, int paused,
		       const struct stasks *tasks)
{
	char cmd[512] = "";
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)p->pid);
	FILE *f = fopen(path, "re");
	if (f) {
		size_t k = fread(cmd, 1, sizeof(cmd) - 1, f);
		for (size_t i = 0; i + 1 < k; i++)
			if ((unsigned char)cmd[i] < ' ')
				cmd[i] = ' ';
		cmd[k] = 0;
		fclose(f);
	}
	printf("Process %d: %s\n", (int)p->pid, cmd);
	if (paused)
		printf("Python %s (%s), paused for %.2f ms\n", p->version, p->pyobj, pause_ms);
	else
		printf("Python %s (%s), read without pausing (--nonblocking)\n", p->version, p->pyobj);
	for (int i = 0; i < n; i++) {
		struct sthread *t = &th[i];
		printf("\nThread %d \"%s\"%s (%s)%s%s\n", (int)t->tid, t->comm, t->tid == p->pid ? " main" : "",
		       state_name(t->state), t->gil ? ", holds the GIL" : "",
		       paused && !t->held ? ", could not be paused: read running" : "");
		if (!t->py) {
			printf("  (no Python thread state: not running Python)\n");
			if (!SN)
				continue;
		}
		if (t->fault)
			printf("  (its stack changed while being read; try again)\n");
		if (t->py && !t->n && !t->fault)
			printf("  (no Python frames)\n");
		else if (t->n)
			printf("  Traceback (most recent call last):\n");
		if (t->missing)
			printf("  ... %u older frames not shown\n", t->missing);
		struct snframe *mf = NULL;
		int nm = merged(t, &mf);
		if (SN && nm > 0 && !t->n)
			printf("  Native stack (most recent call last):\n");
		for (int k = (SN ? nm : t->n) - 1; k >= 0; k--) {
			if (SN && !mf[k].python) {
				const struct snframe *nf = &mf[k];
				const char *mod = nf->module ? strrchr(nf->module, '/') : NULL;
				mod = mod ? mod + 1 : nf->module ? nf->module : "?";
				if (nf->name && nf->file && nf->line)
					printf("    [native] %s (%s:%u) in %s\n", nf->name, nf->file, nf->line, mod);
				else if (nf->name)
					printf("    [native] %s in %s\n", nf->name, mod);
				else
					printf("    [native] %#llx in %s+%#llx\n", (unsigned long long)nf->pc, mod,
					       (unsigned long long)nf->offset);
				continue;
			}
			struct fview v;
			frame_view(p, &t->fr[SN ? mf[k].py_index : k], &v);
			if (v.line > 0)
				printf("    File \"%s\", line %d, in %s\n", v.file, v.line, v.func);
			else
				printf("    File \"%s\", in %s\n", v.file ? v.file : "?", v.func);
			char *src = source_line(p->pid, v.file, v.line);
			if (src)
				printf("      %s\n", src);
			free(src);
		}
		if (SN && t->held && !t->complete && nm > 0)
			printf("    (the native stack could not be unwound further)\n");
		free(mf);
	}
	stack_tasks_text(tasks, p, task_frame_view);
}

static int print_json(struct pyproc *p, struct sthread *th, int n, double pause_ms, int paused,
		      const struct stasks *tasks)
{
	struct json j;
	json_init(&j, stdout, 2);
	json_object_begin(&j);
	json_key(&j, "pid");
	json_int(&j, p->pid);
	json_key(&j, "python");
	json_string(&j, p->version);
	json_key(&j, "interpreter");
	json_string(&j, p->pyobj);
	json_key(&j, "paused");
	json_bool(&j, paused);
	json_key(&j, "pause_ms");
	if (paused)
		json_double(&j, pause_ms);
	else
		json_null(&j);
	json_key(&j, "threads");
	json_array_begin(&j);
	for (int i = 0; i < n; i++) {
		struct sthread *t = &th[i];
		json_object_begin(&j);
		json_key(&j, "tid");
		json_int(&j, t->tid);
		json_key(&j, "name");
		json_string(&j, t->comm);
		json_key(&j, "main");
		json_bool(&j, t->tid == p->pid);
		json_key(&j, "state");
		json_string(&j, state_name(t->state));
		json_key(&j, "paused");
		json_bool(&j, t->held);
		json_key(&j, "python");
		json_bool(&j, t->py);
		json_key(&j, "holds_gil");
		json_bool(&j, t->gil);
		json_key(&j, "torn");
		json_bool(&j, t->fault);
		json_key(&j, "frames_not_shown");
		json_uint(&j, t->missing);
		json_key(&j, "frames");
		json_array_begin(&j);
		struct snframe *mf = NULL;
		int nm = merged(t, &mf);
		for (int k = (SN ? nm : t->n) - 1; k >= 0; k--) {
			if (SN && !mf[k].python) {
				const struct snframe *f = &mf[k];
				json_object_begin(&j);
				json_key(&j, "kind");
				json_string(&j, "native");
				json_key(&j, "function");
				json_string(&j, f->name);
				json_key(&j, "file");
				json_string(&j, f->file);
				json_key(&j, "line");
				if (f->line)
					json_uint(&j, f->line);
				else
					json_null(&j);
				json_key(&j, "module");
				json_string(&j, f->module);
				json_key(&j, "address");
				json_uint(&j, f->pc);
				json_object_end(&j);
				continue;
			}
			struct fview v;
			frame_view(p, &t->fr[SN ? mf[k].py_index : k], &v);
			json_object_begin(&j);
			if (SN) {
				json_key(&j, "kind");
				json_string(&j, "python");
			}
			json_key(&j, "function");
			json_string(&j, v.func);
			json_key(&j, "file");
			json_string(&j, v.file);
			json_key(&j, "line");
			if (v.line > 0)
				json_int(&j, v.line);
			else
				json_null(&j);
			json_object_end(&j);
		}
		free(mf);
		json_array_end(&j);
		if (SN) {
			json_key(&j, "native_complete");
			json_bool(&j, t->complete);
		}
		json_object_end(&j);
	}
	json_array_end(&j);
	stack_tasks_json(tasks, p, task_frame_view, &j);
	json_object_end(&j);
	return json_finish(&j);
}

int cmd_stack(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "nonblocking", no_argument, 0, 'n' },
		{ "json", no_argument, 0, 'j' },
		{ "native", no_argument, 0, 'N' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int nonblocking = 0, as_json = 0, native = 0, c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			nonblocking = 1;
			break;
		case 'j':
			as_json = 1;
			break;
		case 'N':
			native = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			die_usage(usage_text);
		}
	}
	if (optind != argc - 1)
		die_usage(usage_text);
	if (native && nonblocking) {
		errorf("--native needs the threads' registers: it cannot be used with --nonblocking");
		return 2;
	}
	uint32_t pid;
	if (parse_u32(argv[optind], 1, 0x7fffffff, &pid)) {
		errorf("'%s' is not a process id", argv[optind]);
		return 2;
	}
	char err[1024];
	struct pyproc p;
	if (pyproc_open(&p, (pid_t)pid, err, sizeof(err)) || pyproc_wait_loaded(&p, 3000, NULL, err, sizeof(err)) ||
	    pyproc_python(&p, agent_dir(), err, sizeof(err))) {
		errorf("%s", err);
		pyproc_close(&p);
		return 1;
	}

	/* The threads, as the kernel sees them. */
	int cap = 64, n = 0;
	struct sthread *th = calloc((size_t)cap, sizeof(*th));
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	struct dirent *e;
	while (th && d && (e = readdir(d))) {
		pid_t tid = (pid_t)strtol(e->d_name, NULL, 10);
		if (tid <= 0)
			continue;
		if (n == cap) {
			struct sthread *nt = realloc(th, (size_t)cap * 2 * sizeof(*nt));
			if (!nt)
				break;
			th = nt;
			cap *= 2;
		}
		memset(&th[n], 0, sizeof(th[n]));
		th[n].tid = tid;
		read_comm((pid_t)pid, &th[n]);
		n++;
	}
	if (d)
		closedir(d);
	if (!th) {
		errorf("out of memory");
		return 1;
	}

	if (native && !(SN = stack_native_new(&p))) {
		errorf("out of memory");
		return 1;
	}
	struct ptstop ps;
	int paused = 0;
	memset(&ps, 0, sizeof(ps));
	if (!nonblocking) {
		if (ptstop_all(&ps, (pid_t)pid, 1000, err, sizeof(err))) {
			errorf("%s", err);
			return 1;
		}
		ptstop_regs(&ps);
		paused = 1;
	}

	/* Read everything needed while the process is held. */
	static struct strata_pythread pts[MAX_PYTHREADS];
	int npt = -1;
	for (int tries = 0; tries < (paused ? 1 : 5) && npt < 0; tries++)
		npt = p.reader->threads(pts, MAX_PYTHREADS);
	long tid_off = -2;
	for (int k = 0; k < npt; k++) {
		/* Which kernel thread this thread state belongs to. */
		pid_t tid = (pid_t)pts[k].native_id;
		if (!tid && paused)
			for (int i = 0; i < ps.n; i++)
				if (ps.t[i].have_regs && ps.t[i].regs.fs_base == pts[k].thread_id)
					tid = ps.t[i].tid;
		if (!tid) {
			if (tid_off == -2)
				tid_off = glibc_tid_offset();
			int32_t v;
			if (tid_off >= 0 && pyproc_read(&p, &v, pts[k].thread_id + (uint64_t)tid_off, sizeof(v)) == 0)
				tid = v;
		}
		struct sthread *t = NULL;
		for (int i = 0; i < n && !t; i++)
			if (th[i].tid == tid)
				t = &th[i];
		if (!t)
			continue; /* a thread state of a thread that has gone */
		t->py = 1;
		t->gil = pts[k].holds_gil;
		t->pthread = pts[k].thread_id;
		int got = -1;
		for (int tries = 0; tries < (paused ? 1 : 5) && got < 0; tries++)
			got = p.reader->walk(pts[k].tstate, t->fr, MAX_FRAMES, &t->missing, NULL);
		t->fault = got < 0;
		t->n = got < 0 ? 0 : got;
		for (int f = 0; f < t->n; f++)
			code_get(&p, t->fr[f].code);
	}
	/* asyncio: every pending task, while the process is still held. */
	struct stasks tasks;
	if (stack_tasks_read(&p, &tasks)) {
		errorf("out of memory");
		return 1;
	}
	for (int i = 0; i < tasks.n; i++)
		for (int f = 0; f < tasks.t[i].n; f++)
			code_get(&p, tasks.t[i].fr[f].code);
	for (int i = 0; i < n; i++) {
		struct ptthread *pt = paused ? ptstop_find(&ps, th[i].tid) : NULL;
		th[i].held = pt && pt->stopped;
		if (SN && pt && pt->have_regs)
			th[i].npcs = stack_native_unwind(SN, &pt->regs, th[i].pcs, MAX_FRAMES, &th[i].complete);
	}
	double pause_ms = 0;
	if (paused) {
		ptstop_release(&ps);
		pause_ms = (double)(ps.release_ns - ps.stop_ns) / 1e6;
	}
	if (npt < 0) {
		errorf("could not read the thread states of process %d (Python %s)%s", (int)pid, p.version,
		       nonblocking ? ": it changed while being read; try again, or without --nonblocking" : "");
		return 1;
	}
	code_finish(&p);
	qsort(th, (size_t)n, sizeof(*th), tid_cmp);
	int rc = 0;
	if (as_json)
		rc = print_json(&p, th, n, pause_ms, paused, &tasks) ? 1 : 0;
	else
		print_text(&p, th, n, pause_ms, paused, &tasks);
	stack_tasks_free(&tasks);
	stack_native_free(SN);
	SN = NULL;
	pyproc_close(&p);
	free(th);
	return rc;
}

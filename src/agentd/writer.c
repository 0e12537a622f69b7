/*
 * writer.c — the helper's writer thread.
 *
 * In strata-agentd, not in the profiled process. Every few milliseconds it
 * drains each thread's ring (in the shared region), turns code-object
 * addresses into REC_CODE records (reading the target's objects through
 * its /proc/PID/mem, so a code object freed in the meantime cannot crash
 * us), interns stacks so a repeated stack costs a few bytes, and appends a
 * compressed chunk to the output every flush interval. Appends use
 * O_APPEND and one write() per chunk, so several processes share one file
 * safely. The stream is ended when the target exits, _exits or execs (it
 * asks, link.h), and when it dies: the rings outlive it, so a killed
 * process loses nothing it sampled.
 *
 * A stream stays silent until it has a sample or ends normally: the child of
 * a fork that immediately execs another program writes nothing.
 *
 * The output can change while the process runs (control.c): an agent in
 * standby has none, and `attach` hands it one, which starts a new stream
 * there (and, for the Python module, a session of its own); `detach` ends
 * that stream and closes the output. Without an output the writer only
 * retires ended threads, and while sampling is off it sleeps until poked.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/procstat.h"
#include "shm/agent.h"
#include "agentd.h"
#include "shm/grave.h"
#include "shm/objects.h"
#include "perfread.h"
#include "remote.h"
#include "shm/unwind.h"
#include "common/format.h"
#include "common/snapshot.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "dev"
#endif

/* ---- intern tables ---------------------------------------------------- */

/* Open-addressing map from a 64-bit key hash to an index, with the keys
 * kept in an arena for exact comparison. */
struct itab {
	uint64_t *hash;
	uint32_t *id, *off, *len;
	uint32_t cap, count;
	struct wbuf arena;
};

static uint64_t fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h | 1; /* 0 marks an empty slot */
}

static void itab_free(struct itab *t)
{
	free(t->hash);
	free(t->id);
	free(t->off);
	free(t->len);
	wbuf_free(&t->arena);
	memset(t, 0, sizeof(*t));
}

static int itab_grow(struct itab *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 1024;
	uint64_t *h = calloc(cap, sizeof(*h));
	uint32_t *id = calloc(cap, sizeof(*id)), *off = calloc(cap, sizeof(*off)),
		 *len = calloc(cap, sizeof(*len));
	if (!h || !id || !off || !len) {
		free(h);
		free(id);
		free(off);
		free(len);
		return -1;
	}
	for (uint32_t i = 0; i < t->cap; i++) {
		if (!t->hash[i])
			continue;
		uint32_t j = (uint32_t)t->hash[i] & (cap - 1);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = t->hash[i];
		id[j] = t->id[i];
		off[j] = t->off[i];
		len[j] = t->len[i];
	}
	free(t->hash);
	free(t->id);
	free(t->off);
	free(t->len);
	t->hash = h;
	t->id = id;
	t->off = off;
	t->len = len;
	t->cap = cap;
	return 0;
}

/* Returns the id stored for key, or inserts `new_id` and returns
 * UINT32_MAX to say it was new (or on OOM, in which case *oom is set). */
static uint32_t itab_get_or_add(struct itab *t, const void *key, uint32_t klen, uint32_t new_id, int *oom)
{
	if ((t->count + 1) * 4 >= t->cap * 3 && itab_grow(t)) {
		*oom = 1;
		return UINT32_MAX;
	}
	uint64_t h = fnv1a(key, klen);
	uint32_t j = (uint32_t)h & (t->cap - 1);
	while (t->hash[j]) {
		if (t->hash[j] == h && t->len[j] == klen &&
		    memcmp(t->arena.data + t->off[j], key, klen) == 0)
			return t->id[j];
		j = (j + 1) & (t->cap - 1);
	}
	size_t off = t->arena.len;
	wbuf_put(&t->arena, key, klen);
	if (t->arena.oom || off > UINT32_MAX) {
		*oom = 1;
		return UINT32_MAX;
	}
	t->hash[j] = h;
	t->id[j] = new_id;
	t->off[j] = (uint32_t)off;
	t->len[j] = klen;
	t->count++;
	return UINT32_MAX;
}

/* ---- code table ----------------------------------------------------------- */

/* Code objects by (address, low bits of co_firstlineno). An entry whose
 * object has died (dies_at set) still answers for samples taken before the
 * death and is dropped at the end of the drain pass, so a new code object
 * at the same address becomes a new entry. Linear probing with
 * backward-shift deletion, so there are no tombstones. */
struct centry {
	uint64_t addr, dies_at;
	uint32_t index;
	uint16_t first;
	uint8_t used;
};

struct ctab {
	struct centry *e;
	uint32_t cap, count;
};

static uint32_t chash(uint64_t addr, uint16_t first)
{
	return (uint32_t)(((addr >> 4) ^ ((uint64_t)first << 40)) * 0x9E3779B97F4A7C15ull >> 32);
}

static struct centry *ctab_find(struct ctab *t, uint64_t addr, uint16_t first)
{
	if (!t->cap)
		return NULL;
	for (uint32_t j = chash(addr, first) & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
		struct centry *e = &t->e[j];
		if (!e->used)
			return NULL;
		if (e->addr == addr && e->first == first)
			return e;
	}
}

static int ctab_add(struct ctab *t, uint64_t addr, uint16_t first, uint32_t index, uint64_t dies_at)
{
	if ((t->count + 1) * 2 > t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 1024;
		struct centry *n = calloc(cap, sizeof(*n));
		if (!n)
			return -1;
		for (uint32_t i = 0; i < t->cap; i++) {
			if (!t->e[i].used)
				continue;
			uint32_t j = chash(t->e[i].addr, t->e[i].first) & (cap - 1);
			while (n[j].used)
				j = (j + 1) & (cap - 1);
			n[j] = t->e[i];
		}
		free(t->e);
		t->e = n;
		t->cap = cap;
	}
	uint32_t j = chash(addr, first) & (t->cap - 1);
	while (t->e[j].used)
		j = (j + 1) & (t->cap - 1);
	t->e[j] = (struct centry){ .addr = addr, .dies_at = dies_at, .index = index, .first = first, .used = 1 };
	t->count++;
	return 0;
}

static void ctab_remove(struct ctab *t, struct centry *e)
{
	uint32_t i = (uint32_t)(e - t->e), m = t->cap - 1;
	t->e[i].used = 0;
	t->count--;
	/* Shift back later members of the probe run that can move closer. */
	for (uint32_t j = (i + 1) & m; t->e[j].used; j = (j + 1) & m) {
		uint32_t home = chash(t->e[j].addr, t->e[j].first) & m;
		if (((j - home) & m) >= ((j - i) & m)) {
			t->e[i] = t->e[j];
			t->e[j].used = 0;
			i = j;
		}
	}
}

static void ctab_drop_dead(struct ctab *t)
{
	for (uint32_t i = 0; i < t->cap;) {
		if (t->e[i].used && t->e[i].dies_at)
			ctab_remove(t, &t->e[i]); /* may shift a live entry into i: look again */
		else
			i++;
	}
}

static void ctab_free(struct ctab *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

/* Code objects that died (grave.h), taken at the start of a pass. */
struct death {
	struct death *next;
	uint64_t addr, t;
	struct strata_codeinfo info;
};

static void codeinfo_free(struct strata_codeinfo *ci)
{
	free(ci->filename);
	free(ci->name);
	free(ci->qualname);
	free(ci->linetable);
	memset(ci, 0, sizeof(*ci));
}

static void deaths_free(struct death *d)
{
	while (d) {
		struct death *n = d->next;
		codeinfo_free(&d->info);
		free(d);
		d = n;
	}
}

static struct death *deaths_take(void)
{
	struct death *list = NULL;
	for (;;) {
		struct death *d = malloc(sizeof(*d));
		if (!d)
			break;
		if (!grave_take(agent.grave, &d->addr, &d->t, &d->info)) {
			free(d);
			break;
		}
		/* The program's hook cannot read source files (it holds the
		 * GIL): the qualified name of a pre-3.11 code object is
		 * rebuilt here. */
		if (!d->info.qualname)
			d->info.qualname = agentd_reader->qualname(d->info.filename, d->info.firstlineno, d->info.name);
		d->next = list;
		list = d;
	}
	return list;
}

/* ---- writer state ------------------------------------------------------- */

/* Interning is reset past this many stacks so memory stays bounded in very
 * long runs; indices keep increasing, so readers are unaffected. */
#define MAX_INTERNED_STACKS (1u << 20)
#define MAX_PENDING_BYTES (1u << 20)

static struct {
	pthread_mutex_t lock;     /* one drainer at a time: writer thread or exit path */
	_Atomic int stop;
	int fd;
	dev_t dev;
	ino_t ino;
	int failed;               /* output unusable: stop writing */
	struct wbuf recs;         /* records of the next chunk */
	struct wbuf chunk;
	uint32_t seq;
	int any_samples;          /* this stream has samples: it is worth writing */
	uint64_t last_time;
	uint64_t last_flush;
	uint64_t samples, dropped;
	struct ctab codes;
	struct itab stacks;
	struct death *dying;      /* deaths taken for the current pass */
	uint32_t next_code, next_stack;
	struct wbuf key;          /* scratch for stack keys */
	struct rec_pyframe *pyf;  /* scratch for REC_STACK frames */
	uint32_t pyf_cap;
	int fdw[2];               /* self-pipe to wake the writer early */
	pthread_t thread;
	int running;
	int attached;             /* output handed over by `attach`: its stream is written
	                           * even without samples, so every attach leaves a file */
	int own_session;          /* we wrote the output's session: we end it too */
	uint64_t session_stream;
	uint64_t last_scan;       /* by-tid mode: last threads_scan() */
} W = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1, .fdw = { -1, -1 } };

/* There is an output (else standby: records are dropped). In the shared
 * state: the target's deallocation hook asks too. */
/* A process whose module was refused after the start (agent.c) has
 * none, whatever the order it and this helper set things in. */
static int writer_has_output(void)
{
	return atomic_load_explicit(&agent.has_output, memory_order_relaxed) &&
	       atomic_load_explicit(&agent.layout, memory_order_relaxed) != LAYOUT_BAD;
}

void writer_set_busy(void) { atomic_store(&agent.writer_idle, 0); }

void writer_poke(void)
{
	if (W.fdw[1] >= 0) {
		char c = 0;
		ssize_t r = write(W.fdw[1], &c, 1);
		(void)r;
	}
}

static int open_output(void)
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

static void flush_chunk(uint16_t flags)
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

/* ---- records -------------------------------------------------------------- */

/* argv from /proc/PID/cmdline (NUL-separated) into cmd; returns argc. */
static uint32_t read_cmdline(char *cmd, size_t cmdlen, char **argv, uint32_t max)
{
	uint32_t argc = 0;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)agent.pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t len = 0;
	if (fd >= 0) {
		len = read(fd, cmd, cmdlen - 1);
		close(fd);
	}
	if (len > 0) {
		cmd[len] = 0;
		for (ssize_t i = 0; i < len && argc < max; i += (ssize_t)strlen(cmd + i) + 1)
			argv[argc++] = cmd + i;
	}
	return argc;
}

/* The target's parent: field 4 of /proc/PID/stat. */
static pid_t target_ppid(void)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)agent.pid);
	const char *rp = procstat_read(path, buf, sizeof(buf));
	const char *f = rp ? procstat_field(rp, 4) : NULL;
	return f ? (pid_t)atoi(f) : 0;
}

static void put_process(uint32_t flags)
{
	char exe[4096], link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)agent.pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	char *argv[256];
	char cmd[16384];
	uint32_t argc = read_cmdline(cmd, sizeof(cmd), argv, 256);
	struct rec_process p = {
		.pid = (uint32_t)agent.pid,
		.ppid = (uint32_t)target_ppid(),
		.start_mono_ns = agent.start_ns,
		.python_version = agent.python_version,
		.executable = exe,
		.argc = argc,
		.argv = argv,
		.mode = (uint32_t)agent.cfg.mode,
		.rate_hz = agent.cfg.rate_hz,
		.trigger = (uint32_t)agent.trigger,
		.period_ns = agent.cfg.period_ns,
		.flags = flags | (agent.cfg.objects ? PROC_OBJECTS : 0),
		.objects_rate = agent.cfg.objects ? agent.cfg.objects_rate : 0,
	};
	const struct event_list *ev = &agent.cfg.events;
	char *names[EVENTS_MAX];
	if (agent.trigger == TRIGGER_PERF_EVENT) {
		for (uint32_t i = 0; i < ev->n; i++)
			names[i] = (char *)ev->ev[i].name;
		p.nevents = ev->n;
		p.events = names;
		/* period_ns is a time: only a clock's period is one. */
		p.period_ns = ev->ev[0].flags & EVS_CLOCK ? agent.cfg.event_period : 0;
		p.rate_hz = p.period_ns ? (uint32_t)(1000000000ull / p.period_ns) : 0;
	}
	rec_put_process(&W.recs, &p);
	for (uint32_t i = 0; i < p.nevents; i++) {
		struct rec_event_desc d = {
			.index = i,
			.name = names[i],
			.type = ev->ev[i].type,
			.config = ev->ev[i].config,
			.period = i == 0 ? agent.cfg.event_period : 0,
			.flags = (i == 0 ? EVD_SAMPLING : 0) | (agent.cfg.event_exclude_kernel ? EVD_USER_ONLY : 0) |
				 (ev->ev[i].flags & EVS_CLOCK ? EVD_CLOCK : 0),
		};
		rec_put_event_desc(&W.recs, &d);
	}
}

static void announce(struct tslot *s)
{
	if (!s->announced) {
		struct rec_thread t = {
			.tid = (uint32_t)s->tid,
			.start_mono_ns = s->start_ns,
			.flags = s->tid == agent.pid ? THREAD_MAIN : 0,
			.name = s->name,
		};
		rec_put_thread(&W.recs, &t);
		s->announced = 1;
		atomic_store(&s->name_dirty, 0);
	} else if (atomic_exchange(&s->name_dirty, 0)) {
		struct rec_thread_name n = { .tid = (uint32_t)s->tid, .name = s->name };
		rec_put_thread_name(&W.recs, &n);
	}
}

static void put_code(uint32_t id, uint64_t addr, const struct strata_codeinfo *ci)
{
	struct rec_code rc = {
		.index = id,
		.addr = addr,
		.linetable_fmt = (uint32_t)agentd_reader->linetable_fmt,
		.firstlineno = ci->firstlineno,
		.flags = ci->flags,
		.filename = ci->filename,
		.name = ci->name,
		.qualname = ci->qualname ? ci->qualname : ci->name,
		.linetable = ci->linetable,
		.linetable_len = ci->linetable_len,
	};
	rec_put_code(&W.recs, &rc);
}

/* The REC_CODE index of the code object a frame of a sample taken at time
 * `t` refers to, emitting the REC_CODE record the first time. */
static uint32_t code_index(const struct strata_pyframe *f, uint64_t t)
{
	struct centry *e = ctab_find(&W.codes, f->code, f->first);
	if (e) {
		if (!e->dies_at || t < e->dies_at)
			return e->index;
		ctab_remove(&W.codes, e); /* a new object at a dead one's address */
	}
	uint32_t id = W.next_code++;
	uint64_t dies_at = 0;
	struct strata_codeinfo ci;
	/* Died after this sample was taken: its contents were kept. */
	for (struct death *d = W.dying; d; d = d->next)
		if (d->addr == f->code && (uint16_t)d->info.firstlineno == f->first && d->t > t) {
			put_code(id, f->code, &d->info);
			dies_at = d->t;
			goto added;
		}
	if (agentd_reader->read_code(f->code, &ci) == 0 && (uint16_t)ci.firstlineno == f->first) {
		put_code(id, f->code, &ci);
		codeinfo_free(&ci);
	} else {
		/* Freed before it could be read, and not seen by the hook (it
		 * died before the hook was installed, or memory was short). */
		if (ci.filename || ci.name)
			codeinfo_free(&ci);
		struct strata_codeinfo unk = { .filename = "<unknown>", .name = "[code object freed before it was read]" };
		struct rec_code rc = { .index = id, .addr = f->code, .filename = unk.filename, .name = unk.name,
				       .qualname = unk.name, .linetable_fmt = LT_NONE };
		rec_put_code(&W.recs, &rc);
	}
added:
	ctab_add(&W.codes, f->code, f->first, id, dies_at);
	return id;
}

static uint32_t stack_index(const struct rsample *h, const struct strata_pyframe *py, const uint64_t *native)
{
	/* Code records must precede the stack record that names them. */
	if (W.pyf_cap < h->npy) {
		struct rec_pyframe *n = realloc(W.pyf, h->npy * sizeof(*n));
		if (!n)
			return UINT32_MAX;
		W.pyf = n;
		W.pyf_cap = h->npy;
	}
	wbuf_reset(&W.key);
	wbuf_uv(&W.key, h->stack_flags);
	wbuf_uv(&W.key, h->py_missing);
	wbuf_uv(&W.key, h->npy);
	for (uint32_t i = 0; i < h->npy; i++) {
		W.pyf[i].code = code_index(&py[i], h->time_ns);
		W.pyf[i].lasti = py[i].lasti;
		W.pyf[i].flags = py[i].flags;
		wbuf_uv(&W.key, W.pyf[i].code);
		wbuf_sv(&W.key, W.pyf[i].lasti);
		wbuf_uv(&W.key, W.pyf[i].flags);
	}
	wbuf_uv(&W.key, h->nnative);
	for (uint32_t i = 0; i < h->nnative; i++)
		wbuf_uv(&W.key, native[i]);
	if (W.key.oom)
		return UINT32_MAX;
	if (W.stacks.count >= MAX_INTERNED_STACKS)
		itab_free(&W.stacks);
	int oom = 0;
	uint32_t id = itab_get_or_add(&W.stacks, W.key.data, (uint32_t)W.key.len, W.next_stack, &oom);
	if (id != UINT32_MAX)
		return id;
	if (oom)
		return UINT32_MAX;
	id = W.next_stack++;
	if (h->nnative) {
		/* Without --native the one address is a JIT leaf, which its
		 * REC_JIT_IMAGE covers: no object to announce. */
		int outside = agent.cfg.native ? unwind_cover(native, h->nnative, &W.recs) : 1;
		/* The CLI names a stack's addresses when the stack arrives, and
		 * generated code can be announced, run and sampled between this
		 * pass's reading of the perf map and JIT list and its draining
		 * of the rings: read them again first, for a stack with an
		 * address in no object. Cheap when nothing changed, and a stack
		 * is written once. */
		if (outside) {
			perfread_poll(&W.recs);
			jit_poll(&W.recs);
		}
		perfread_cover(native, h->nnative, &W.recs);
	}
	struct rec_stack st = {
		.index = id,
		.flags = h->stack_flags,
		.npy = h->npy,
		.py = W.pyf,
		.py_missing = h->py_missing,
		.nnative = h->nnative,
		.native = (uint64_t *)native,
	};
	rec_put_stack(&W.recs, &st);
	return id;
}

static void put_sample(const struct rsample *h)
{
	const uint8_t *p = (const uint8_t *)(h + 1);
	const uint64_t *counters = (const uint64_t *)p;
	p += h->ncounters * sizeof(uint64_t);
	const struct strata_pyframe *py = (const struct strata_pyframe *)p;
	p += h->npy * sizeof(struct strata_pyframe);
	const uint64_t *native = (const uint64_t *)p;

	uint32_t stack = stack_index(h, py, native);
	if (stack == UINT32_MAX) {
		W.dropped++;
		return;
	}
	if (h->sample_flags & RS_ALLOC) {
		wobj_put_alloc(&W.recs, h, stack, (int64_t)(h->time_ns - W.last_time));
		W.last_time = h->time_ns;
		W.any_samples = 1;
		return;
	}
	struct rec_sample s = {
		.tid = h->tid,
		.dt_ns = (int64_t)(h->time_ns - W.last_time),
		.stack = stack,
		.weight = h->weight,
		.flags = h->sample_flags,
		.ncounters = h->ncounters,
	};
	for (uint32_t i = 0; i < h->ncounters && i < STRATA_MAX_COUNTERS; i++)
		s.counters[i] = counters[i];
	W.last_time = h->time_ns;
	rec_put_sample(&W.recs, &s);
	W.samples++;
	W.any_samples = 1;
}

static void drain_ring(struct ring *r)
{
	uint32_t len;
	const void *rec;
	int keep = writer_has_output();
	while ((rec = ring_peek(r, &len))) {
		if (keep && len >= sizeof(struct rsample))
			put_sample(rec);
		ring_release(r);
		if (W.recs.len > MAX_PENDING_BYTES)
			flush_chunk(0);
	}
}

static void report_drops(struct tslot *s)
{
	uint64_t d = atomic_load(&s->dropped);
	if (!writer_has_output()) {
		s->reported_dropped = d; /* nobody to report them to */
		return;
	}
	if (d > s->reported_dropped) {
		struct rec_dropped rd = { .tid = (uint32_t)s->tid, .count = d - s->reported_dropped };
		rec_put_dropped(&W.recs, &rd);
		W.dropped += rd.count;
		s->reported_dropped = d;
	}
}

/* Drains every ring and retires exited threads. Caller holds W.lock. */
static void drain_all(void)
{
	/* New native objects are announced before the samples that may
	 * point into them. */
	if (agent.cfg.native)
		unwind_poll(&W.recs);
	/* So are perf-map names of code generated since (CPython 3.12's
	 * -X perf trampolines, other JITs). */
	perfread_poll(&W.recs);
	/* JIT images, likewise, before the samples in their code. */
	jit_poll(writer_has_output() ? &W.recs : NULL);
	W.dying = deaths_take();
	for (struct death *d = W.dying; d; d = d->next) {
		struct centry *e = ctab_find(&W.codes, d->addr, (uint16_t)d->info.firstlineno);
		if (e && !e->dies_at)
			e->dies_at = d->t;
	}
	int keep = writer_has_output();
	reg_lock();
	for (struct tslot *s = agent.slots; s && keep; s = s->next)
		announce(s);
	if (agent.sampler_slot)
		drain_ring(&agent.sampler_slot->ring);
	struct tslot **pp = &agent.slots;
	while (*pp) {
		struct tslot *s = *pp;
		int exited = atomic_load(&s->exited);
		drain_ring(&s->ring);
		report_drops(s);
		if (exited) {
			struct rec_thread_end te = {
				.tid = (uint32_t)s->tid,
				.end_mono_ns = s->end_ns,
				.samples = atomic_load(&s->samples),
				.dropped = atomic_load(&s->dropped),
			};
			if (keep && s->announced)
				rec_put_thread_end(&W.recs, &te);
			atomic_fetch_add(&agent.retired_samples, te.samples);
			atomic_fetch_add(&agent.retired_dropped, te.dropped);
			*pp = s->next;
			helper_slot_release(s);
			slot_free(s);
			continue;
		}
		pp = &s->next;
	}
	reg_unlock();
	if (keep && agent.cfg.objects)
		wobj_scan(&W.recs, 0);
	/* Every sample taken before these deaths was in a ring and is now
	 * written: forget the dead. */
	ctab_drop_dead(&W.codes);
	deaths_free(W.dying);
	W.dying = NULL;
	if (!keep)
		wbuf_reset(&W.recs);
}

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

/* The header and session of an output the agent was asked to create:
 * what `strata record` writes before it starts a command. */
static int write_session_start(void)
{
	struct file_header fh = { .major = STRATA_FMT_MAJOR, .minor = STRATA_FMT_MINOR, .created_ns = realtime_ns() };
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	file_header_pack(hdr, &fh);
	if (write(W.fd, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		return -1;
	char *argv[256];
	char cmd[16384];
	uint32_t argc = read_cmdline(cmd, sizeof(cmd), argv, 256);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	struct rec_session se = {
		.strata_version = STRATA_VERSION,
		.start_realtime_ns = fh.created_ns,
		.start_mono_ns = mono_ns(),
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
	struct wbuf recs;
	wbuf_init(&recs);
	rec_put_session(&recs, &se);
	int rc = put_session_chunk(&recs, 0, 0);
	wbuf_free(&recs);
	return rc;
}

static void write_session_end(void)
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

/* Writes the stream's last records. Caller holds W.lock, rings drained. */
static void finish_stream(int reason)
{
	if (!writer_has_output()) {
		wbuf_reset(&W.recs);
		return;
	}
	/* A process with no samples is only worth a record when it exited
	 * normally (a short script) or was attached to; the child of a fork
	 * that execs or _exits before sampling anything leaves no trace. */
	if (agent.cfg.objects)
		wobj_scan(&W.recs, 1);
	if (W.any_samples || reason == END_EXIT || W.attached) {
		struct rec_process_end e = {
			.end_mono_ns = mono_ns(),
			.reason = (uint32_t)reason,
			.samples = W.samples,
			.dropped = W.dropped,
		};
		rec_put_process_end(&W.recs, &e);
		flush_chunk(CHUNK_LAST);
	}
	wbuf_reset(&W.recs);
	/* After an exec the new image may carry on in this output. */
	if (W.own_session && reason != END_EXEC && !W.failed)
		write_session_end();
}

static void *writer_main(void *arg)
{
	(void)arg;
	int idle = 0;
	while (!atomic_load(&W.stop)) {
		/* Sleep 10 ms, or less if poked (a thread exited). With
		 * sampling off there is nothing to drain: sleep until poked
		 * (sampling turned on, a thread ended, the process exits), so
		 * a stopped agent costs no wakeups. */
		fd_set rf;
		FD_ZERO(&rf);
		FD_SET(W.fdw[0], &rf);
		struct timeval tv = { 0, 10 * 1000 };
		if (select(W.fdw[0] + 1, &rf, NULL, NULL, idle ? NULL : &tv) > 0) {
			char buf[64];
			while (read(W.fdw[0], buf, sizeof(buf)) > 0)
				;
		}
		/* A module of another patch release not checked yet
		 * (agent.c): the samples wait in the rings. */
		if (atomic_load(&agent.layout) == LAYOUT_PENDING) {
			idle = 0;
			continue;
		}
		pthread_mutex_lock(&W.lock);
		drain_all();
		int on = atomic_load(&agent.sampling);
		uint64_t now = mono_ns();
		if (W.any_samples &&
		    (W.recs.len >= MAX_PENDING_BYTES / 4 ||
		     now - W.last_flush >= (uint64_t)agent.cfg.flush_ms * 1000000u || (!on && W.recs.len)))
			flush_chunk(0);
		idle = !on;
		/* Sampling may have come back on since `on` was read: then
		 * the poke that said so wakes us again at once. */
		atomic_store(&agent.writer_idle, idle && !atomic_load(&agent.sampling));
		pthread_mutex_unlock(&W.lock);
		/* Threads that predate a dlopen'ed agent, or were started
		 * without the pthread_create wrapper, are found by a scan. */
		if (agent.by_tid && on && now - W.last_scan >= 100 * 1000000ull) {
			W.last_scan = now;
			threads_scan();
		}
	}
	return NULL;
}

static void state_reset(void)
{
	wbuf_reset(&W.recs);
	ctab_free(&W.codes);
	itab_free(&W.stacks);
	W.next_code = W.next_stack = 0;
	W.seq = 0;
	W.any_samples = 0;
	W.samples = W.dropped = 0;
	W.last_time = agent.start_ns;
	W.last_flush = mono_ns();
	W.failed = 0;
	if (agent.cfg.native)
		unwind_stream_reset();
	perfread_stream_reset();
	jit_stream_reset();
	wobj_reset();
}

static int start_thread(void)
{
	if (W.fdw[0] < 0 && pipe2(W.fdw, O_CLOEXEC | O_NONBLOCK))
		return -1;
	atomic_store(&W.stop, 0);
	if (pthread_create(&W.thread, NULL, writer_main, NULL))
		return -1;
	W.running = 1;
	return 0;
}

int writer_start(void)
{
	if (W.fd < 0 && open_output())
		return -1;
	state_reset();
	atomic_store(&agent.has_output, 1);
	put_process(agent.stream_flags);
	return start_thread();
}

int writer_start_standby(void)
{
	state_reset();
	atomic_store(&agent.has_output, 0);
	return start_thread();
}

void writer_finish(int reason)
{
	if (W.running) {
		atomic_store(&W.stop, 1);
		writer_poke();
		pthread_join(W.thread, NULL);
		W.running = 0;
	}
	int expected = LAYOUT_PENDING;
	if (atomic_compare_exchange_strong(&agent.layout, &expected, LAYOUT_BAD)) {
		/* It ended before its module could be checked on a live
		 * frame: what was sampled is not written (agent.c). */
		atomic_store(&agent.has_output, 0);
		char exe[4096], path[64];
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)agent.pid);
		ssize_t el = readlink(path, exe, sizeof(exe) - 1);
		exe[el > 0 ? el : 0] = 0;
		agent_log("the agent module for Python %s was not checked against Python %s before process %d "
			  "ended (no Python code ran with the GIL); it was not profiled. Build a module for this "
			  "interpreter with: make PYTHONS=%s",
			  agent.module_version, agent.python_version, (int)agent.pid, exe);
		if (!agent.standby && !W.attached)
			agent_note_unsupported(agent.cfg.output, agent.pid, target_ppid(), agent.python_version, exe, 1);
	}
	pthread_mutex_lock(&W.lock);
	drain_all();
	finish_stream(reason);
	pthread_mutex_unlock(&W.lock);
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
	int has = writer_has_output();
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
	if (writer_has_output()) {
		snprintf(err, errlen, "busy: already recording to %s", agent.cfg.output[0] ? agent.cfg.output : "a descriptor");
		pthread_mutex_unlock(&W.lock);
		return -1;
	}
	/* Whatever the rings hold predates this attach: drop it. */
	drain_all();
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
	atomic_store(&agent.has_output, 0);
	W.attached = 0;
	if (W.fd >= 0)
		close(W.fd);
	W.fd = -1;
	W.failed = 0;
	agent.cfg.output[0] = 0;
	state_reset();
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

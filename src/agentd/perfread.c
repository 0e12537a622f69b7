/*
 * perfread.c — see perfread.h.
 *
 * Both files are append-only logs written by the process itself, so each
 * is read from where the last pass stopped, whole lines (or whole jitdump
 * records) only: a line still being written is read next time. A file
 * that shrank was recreated (a fork child's interpreter starting its map
 * over): read from the start. Every entry read is kept in memory (bounded),
 * so that a new stream of the same address space (a fork child, whose
 * parent's trampolines are still on its stacks) carries them all.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/agent.h"
#include "perfread.h"
#include "remote.h"
#include "shm/unwind.h"
#include "common/format.h"
#include "common/perfmap.h"
#include "common/pytramp.h"
#include "target.h"

/* Bounds: a runaway map must not grow the agent without limit, and one
 * writer pass must not spend long reading. */
#define MAX_ENTRIES (1u << 20)
#define READ_PER_PASS (1u << 20)
#define LINE_MAX_BYTES 4096
#define JD_HDR_MIN 40
#define JD_REC_MAX (64u << 20)
#define JD_MAGIC 0x4A695444u
#define JD_CODE_LOAD 0

struct src {
	const char *fmt;     /* path pattern with the pid */
	int fd;
	off_t off;           /* consumed up to here */
	dev_t dev;
	ino_t ino;
	int header_done;     /* jitdump: header checked */
};

struct perfread_state {
	pid_t pid;
	struct src map, dump;
	struct perfmap_entry *all;
	uint32_t n, cap, announced;
	int full;
	/* Start addresses of every entry, hashed (0 = empty slot): which
	 * trampolines already have a name. */
	uint64_t *starts;
	uint32_t starts_cap, nstarts;
	pthread_mutex_t own_lock;
	uint64_t *own;
	uint32_t nown, capown;
};

static void perfread_init(struct perfread_state *s)
{
	s->map.fmt = "/tmp/perf-%d.map";
	s->map.fd = -1;
	s->dump.fmt = "/tmp/jit-%d.dump";
	s->dump.fd = -1;
	pthread_mutex_init(&s->own_lock, NULL);
}

TARGET_STATE(struct perfread_state, perfread, perfread_init)
#define R (*perfread_of(agentd_target))

void perfread_note_own(uint64_t start)
{
	pthread_mutex_lock(&R.own_lock);
	if (R.nown == R.capown && R.capown < MAX_ENTRIES) {
		uint32_t cap = R.capown ? R.capown * 2 : 64;
		uint64_t *o = realloc(R.own, cap * sizeof(*o));
		if (o) {
			R.own = o;
			R.capown = cap;
		}
	}
	if (R.nown < R.capown)
		R.own[R.nown++] = start;
	pthread_mutex_unlock(&R.own_lock);
}

static int is_own(uint64_t start)
{
	int found = 0;
	pthread_mutex_lock(&R.own_lock);
	for (uint32_t i = R.nown; i-- > 0 && !found;)
		found = R.own[i] == start;
	pthread_mutex_unlock(&R.own_lock);
	return found;
}

static uint32_t start_slot(uint64_t a, uint32_t cap)
{
	return (uint32_t)((a * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static int start_known(uint64_t a)
{
	if (!R.starts_cap || !a)
		return 0;
	for (uint32_t i = start_slot(a, R.starts_cap);; i = (i + 1) & (R.starts_cap - 1)) {
		if (R.starts[i] == a)
			return 1;
		if (!R.starts[i])
			return 0;
	}
}

static void start_add(uint64_t a)
{
	if (!a || start_known(a))
		return;
	if ((R.nstarts + 1) * 2 > R.starts_cap) {
		uint32_t cap = R.starts_cap ? R.starts_cap * 2 : 1024;
		uint64_t *t = calloc(cap, sizeof(*t));
		if (!t)
			return;
		for (uint32_t i = 0; i < R.starts_cap; i++)
			if (R.starts[i]) {
				uint32_t j = start_slot(R.starts[i], cap);
				while (t[j])
					j = (j + 1) & (cap - 1);
				t[j] = R.starts[i];
			}
		free(R.starts);
		R.starts = t;
		R.starts_cap = cap;
	}
	uint32_t j = start_slot(a, R.starts_cap);
	while (R.starts[j])
		j = (j + 1) & (R.starts_cap - 1);
	R.starts[j] = a;
	R.nstarts++;
}

static void add_entry(uint64_t start, uint64_t size, const char *name, size_t namelen)
{
	if (R.n >= MAX_ENTRIES) {
		if (!R.full)
			agent_log("more than %u perf-map entries; later ones are not recorded", MAX_ENTRIES);
		R.full = 1;
		return;
	}
	if (R.nown && is_own(start))
		return;
	if (R.n == R.cap) {
		uint32_t cap = R.cap ? R.cap * 2 : 256;
		struct perfmap_entry *e = realloc(R.all, cap * sizeof(*e));
		if (!e)
			return;
		R.all = e;
		R.cap = cap;
	}
	char *c = strndup(name, namelen > PERFMAP_NAME_MAX ? PERFMAP_NAME_MAX : namelen);
	if (!c)
		return;
	R.all[R.n++] = (struct perfmap_entry){ start, size, c };
	start_add(start);
}

static void src_close(struct src *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->off = 0;
	s->header_done = 0;
}

/* Opens the file when it exists and is ours; returns its size, or -1. */
static off_t src_size(struct src *s)
{
	char path[64];
	struct stat st;
	if (s->fd >= 0) {
		/* Recreated under the same name (unlink + create): start over. */
		snprintf(path, sizeof(path), s->fmt, (int)R.pid);
		struct stat pst;
		if (stat(path, &pst) == 0 && (pst.st_dev != s->dev || pst.st_ino != s->ino))
			src_close(s);
	}
	if (s->fd < 0) {
		/* Tried on every pass, before the rings are drained, and again
		 * before a stack with an address in no object is written
		 * (writer-stacks.c): an entry is written before its code runs,
		 * so every sample that can point into the code is written
		 * after its entry was read. */
		snprintf(path, sizeof(path), s->fmt, (int)R.pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return -1;
		/* /tmp is shared: a file someone else made is not our map. */
		if (fstat(fd, &st) || st.st_uid != geteuid() || !S_ISREG(st.st_mode)) {
			close(fd);
			return -1;
		}
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, 512);
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
		s->fd = fd;
		s->dev = st.st_dev;
		s->ino = st.st_ino;
		s->off = 0;
	}
	if (fstat(s->fd, &st))
		return -1;
	if (st.st_size < s->off) {
		s->off = 0; /* truncated: rewritten from the start */
		s->header_done = 0;
	}
	return st.st_size;
}

static void read_map(void)
{
	struct src *s = &R.map;
	off_t size = src_size(s);
	if (size <= s->off)
		return;
	/* Per thread (the writer's, or the link's finishing a target),
	 * at its first use. */
	enum { BUF = 65536 };
	static __thread char *buf;
	if (!buf && !(buf = malloc(BUF)))
		return;
	size_t budget = READ_PER_PASS;
	while (s->off < size && budget) {
		size_t want = (size_t)(size - s->off) < BUF ? (size_t)(size - s->off) : BUF;
		ssize_t got = pread(s->fd, buf, want, s->off);
		if (got <= 0)
			return;
		size_t pos = 0, used = 0;
		while (pos < (size_t)got) {
			char *nl = memchr(buf + pos, '\n', (size_t)got - pos);
			if (!nl)
				break;
			size_t len = (size_t)(nl - (buf + pos));
			uint64_t start, sz;
			const char *name;
			size_t namelen;
			if (perfmap_parse_line(buf + pos, len, &start, &sz, &name, &namelen) == 0)
				add_entry(start, sz, name, namelen);
			pos += len + 1;
			used = pos;
		}
		if (!used) {
			/* No newline in a whole buffer: a line longer than any
			 * real one; skip it. Or the last line is unfinished. */
			if ((size_t)got < BUF)
				return;
			used = (size_t)got;
		}
		s->off += (off_t)used;
		budget = budget > used ? budget - used : 0;
	}
}

/* jitdump (tools/perf/Documentation/jitdump-specification.txt): a header,
 * then records {u32 id, u32 total_size, u64 timestamp, body}; a
 * JIT_CODE_LOAD body is {u32 pid, u32 tid, u64 vma, u64 code_addr,
 * u64 code_size, u64 code_index, name NUL, code}. */
static void read_dump(void)
{
	struct src *s = &R.dump;
	off_t size = src_size(s);
	if (size <= s->off)
		return;
	uint8_t h[JD_HDR_MIN];
	if (!s->header_done) {
		if (size < JD_HDR_MIN || pread(s->fd, h, sizeof(h), 0) != (ssize_t)sizeof(h))
			return;
		uint32_t magic, hsize;
		memcpy(&magic, h, 4);
		memcpy(&hsize, h + 8, 4);
		if (magic != JD_MAGIC || hsize < JD_HDR_MIN || hsize > 4096) {
			src_close(s); /* not a dump we can read; retried later */
			return;
		}
		s->off = hsize;
		s->header_done = 1;
	}
	size_t budget = READ_PER_PASS;
	uint8_t rh[16 + 40];
	char name[PERFMAP_NAME_MAX + 1];
	while (budget && size - s->off >= 16) {
		ssize_t got_hdr = pread(s->fd, rh, sizeof(rh), s->off);
		if (got_hdr < 16)
			return;
		uint32_t id, total;
		memcpy(&id, rh, 4);
		memcpy(&total, rh + 4, 4);
		if (total < 16 || total > JD_REC_MAX) {
			/* Corrupt: stop reading this file for good. */
			s->off = size;
			return;
		}
		if ((off_t)total > size - s->off)
			return; /* not written whole yet */
		if (id == JD_CODE_LOAD && total >= 16 + 40 + 1 && got_hdr == (ssize_t)sizeof(rh)) {
			uint64_t addr, csize;
			memcpy(&addr, rh + 16 + 16, 8);
			memcpy(&csize, rh + 16 + 24, 8);
			size_t nmax = total - 56 < PERFMAP_NAME_MAX ? total - 56 : PERFMAP_NAME_MAX;
			ssize_t got = pread(s->fd, name, nmax, s->off + 56);
			if (got > 0) {
				size_t nl = strnlen(name, (size_t)got);
				if (csize && addr + csize > addr)
					add_entry(addr, csize, name, nl);
			}
		}
		s->off += total;
		budget = budget > total ? budget - total : 0;
	}
}

void perfread_poll(struct wbuf *recs)
{
	pid_t pid = agent.pid; /* the helper reads its target's files */
	if (pid != R.pid) {
		/* A fork child: the parent's files are not ours to follow. */
		src_close(&R.map);
		src_close(&R.dump);
		R.pid = pid;
	}
	read_map();
	read_dump();
	if (!recs) {
		R.announced = R.n;
		return;
	}
	while (R.announced < R.n) {
		uint32_t k = R.n - R.announced;
		if (k > PERFMAP_REC_MAX)
			k = PERFMAP_REC_MAX;
		rec_put_perfmap(recs, R.all + R.announced, k);
		R.announced += k;
	}
}

static int tramp_read(void *ctx, uint64_t addr, uint8_t *buf, unsigned n)
{
	(void)ctx;
	return remote_read(buf, addr, n);
}

/* Names CPython's perf trampolines (pytramp.h) found as return addresses
 * in no object and in no perf-map entry yet. */
void perfread_cover(const uint64_t *addrs, uint32_t n, struct wbuf *recs)
{
	int added = 0;
	for (uint32_t i = 1; i < n; i++) {
		/* Known already (the cheap test first: most are), or in an object. */
		if (start_known(addrs[i] - 6) || start_known(addrs[i] - 10) || unwind_in_object(addrs[i] - 1))
			continue;
		const struct pytramp_shape *t = pytramp_at(addrs[i], tramp_read, NULL);
		if (!t || start_known(addrs[i] - t->ra))
			continue;
		/* Its own name comes with the entry CPython writes; the CLI
		 * folds the frame into its Python frame either way. */
		static const char name[] = "py::[trampoline]";
		add_entry(addrs[i] - t->ra, t->len, name, sizeof(name) - 1);
		added = 1;
	}
	if (added && recs)
		perfread_poll(recs);
}

void perfread_stream_reset(void)
{
	R.announced = 0;
}

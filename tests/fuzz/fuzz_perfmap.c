/*
 * fuzz_perfmap.c — libFuzzer target for perf maps and jitdump files,
 * which the profiled program (CPython's -X perf / -X perf_jit, any other
 * JIT) writes and strata reads:
 *  - the helper's reader (src/agentd/perfread.c, included here so that
 *    each input starts from a clean state): /tmp/perf-PID.map and
 *    /tmp/jit-PID.dump read incrementally as they grow, shrink or are
 *    made again, and the trampolines it names from the target's memory;
 *  - the line parser and the REC_PERFMAP record (src/common/perfmap.c),
 *    and the CLI's lookup table over the entries.
 * Every REC_PERFMAP record the helper writes must decode again, entries
 * whole (start + size does not wrap), and be found in the CLI's table.
 *
 * The files are this process's own (/tmp/perf-<our pid>.map: no JIT runs
 * in it), removed at exit. Input: pieces [u8 op][u16 len LE][bytes]:
 *   op % 8 = 0  append the bytes to the perf map
 *            1  append them to the jitdump
 *            2  the helper polls both files
 *            3  the perf map shrinks to the bytes (rewritten)
 *            4  the jitdump is made again (unlinked, a new file)
 *            5  the bytes are the target's memory at BASE, and the
 *               writer covers return addresses in it (perfread_cover)
 *            6  the bytes are a REC_PERFMAP body, decoded
 *            7  the bytes are one perf-map line, parsed
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "../../src/agentd/perfread.c"
#include "../../src/agentd/target.c"

#define BASE 0x7f0000000000ull

static struct agent_state fake_agent;
struct agent_state *agentp = &fake_agent;

static const uint8_t *mem;
static size_t mem_len;
static char map_path[64], dump_path[64];

int remote_read(void *dst, uint64_t addr, size_t n)
{
	if (addr < BASE || addr - BASE > mem_len || n > mem_len - (addr - BASE))
		return -1;
	memcpy(dst, mem + (addr - BASE), n);
	return 0;
}

int unwind_in_object(uint64_t pc)
{
	(void)pc;
	return 0;
}

void agent_log(const char *fmt, ...)
{
	(void)fmt;
}

static void cleanup(void)
{
	unlink(map_path);
	unlink(dump_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	/* The helper's state for its one target (target.h). */
	agentd_target = target_new(getpid());
	if (!agentd_target)
		abort();
	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", (int)getpid());
	snprintf(dump_path, sizeof(dump_path), "/tmp/jit-%d.dump", (int)getpid());
	atexit(cleanup);
	return 0;
}

/* Back to a helper that has read nothing. */
static void reset(void)
{
	src_close(&R.map);
	src_close(&R.dump);
	for (uint32_t i = 0; i < R.n; i++)
		free(R.all[i].name);
	free(R.all);
	free(R.starts);
	free(R.own);
	R.all = NULL;
	R.starts = NULL;
	R.own = NULL;
	R.n = R.cap = R.announced = 0;
	R.full = 0;
	R.starts_cap = R.nstarts = 0;
	R.nown = R.capown = 0;
	R.pid = 0;
	memset(&fake_agent, 0, sizeof(fake_agent));
	fake_agent.pid = getpid();
	cleanup();
}

static void append(const char *path, const uint8_t *d, size_t n, int trunc)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (trunc ? O_TRUNC : O_APPEND), 0600);
	if (fd < 0)
		abort();
	if (n && write(fd, d, n) != (ssize_t)n)
		abort();
	close(fd);
}

/* What the helper wrote: decoded as the CLI decodes it, into its table. */
static void check_records(const struct wbuf *b)
{
	struct rbuf in, body;
	rbuf_init(&in, b->data, b->len);
	uint64_t type;
	int r;
	struct perfmap_table t = { 0 };
	while ((r = rec_next(&in, &type, &body)) == 1) {
		FUZZ_CHECK(type == REC_PERFMAP);
		struct perfmap_entry *e;
		uint32_t n;
		FUZZ_CHECK(rec_get_perfmap(&body, &e, &n) == 0);
		for (uint32_t i = 0; i < n; i++) {
			FUZZ_CHECK(e[i].size && e[i].start + e[i].size > e[i].start);
			FUZZ_CHECK(perfmap_table_add(&t, e[i].start, e[i].size, e[i].name) == 0);
		}
		for (uint32_t i = 0; i < n; i++)
			FUZZ_CHECK(perfmap_table_find(&t, e[i].start) != NULL);
		perfmap_entries_free(e, n);
	}
	FUZZ_CHECK(r == 0);
	perfmap_table_free(&t);
}

static void poll_now(void)
{
	struct wbuf recs;
	wbuf_init(&recs);
	perfread_poll(&recs);
	check_records(&recs);
	wbuf_free(&recs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size };
	reset();
	while (in.n) {
		uint8_t op = fin_u8(&in) % 8;
		size_t n;
		const uint8_t *d = fin_take(&in, fin_u16(&in), &n);
		switch (op) {
		case 0: append(map_path, d, n, 0); break;
		case 1: append(dump_path, d, n, 0); break;
		case 2: poll_now(); break;
		case 3: append(map_path, d, n, 1); break;
		case 4:
			unlink(dump_path);
			append(dump_path, d, n, 0);
			break;
		case 5: {
			/* Return addresses: every 8 bytes of the memory read
			 * as one (the code they point at is there too). */
			mem = d;
			mem_len = n;
			uint64_t ra[64];
			uint32_t k = 0;
			for (size_t i = 0; i + 8 <= n && k < 64; i += 8)
				ra[k++] = BASE + le64_at(d + i) % (n + 16);
			struct wbuf recs;
			wbuf_init(&recs);
			perfread_cover(ra, k, &recs);
			check_records(&recs);
			wbuf_free(&recs);
			mem = NULL;
			mem_len = 0;
			break;
		}
		case 6: {
			struct rbuf b;
			rbuf_init(&b, d, n);
			struct perfmap_entry *e;
			uint32_t ne;
			if (rec_get_perfmap(&b, &e, &ne) == 0)
				perfmap_entries_free(e, ne);
			break;
		}
		case 7: {
			uint64_t start, sz;
			const char *name;
			size_t nl;
			if (perfmap_parse_line((const char *)d, n, &start, &sz, &name, &nl) == 0)
				FUZZ_CHECK(sz && start + sz > start && name >= (const char *)d &&
					   nl <= n - (size_t)(name - (const char *)d));
			break;
		}
		}
	}
	poll_now();
	reset();
	return 0;
}

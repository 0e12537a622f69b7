/*
 * test_reader.c — the reader against damage: a small real profile
 * (fixtures/small.strata, recorded from fixtures/small.py, run as
 * /tmp/fixture/small.py with `strata record -F 200`) cut at every
 * byte offset and with a byte flipped in each chunk, files from a newer
 * major or minor version, and files that are not profiles at all.
 */
#include "test.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "synth.h"
#include "../../src/lib/profile.h"
#include "../../src/lib/reader.h"

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *d = malloc((size_t)n + 1);
	*len = fread(d, 1, (size_t)n, f);
	fclose(f);
	return d;
}

/* An in-memory file whose contents tests replace at will. */
static int memfile(const void *data, size_t len)
{
	static int fd = -1;
	if (fd < 0)
		fd = memfd_create("strata-test", MFD_CLOEXEC);
	if (ftruncate(fd, 0) || (len && pwrite(fd, data, len, 0) != (ssize_t)len) || lseek(fd, 0, SEEK_SET))
		return -1;
	return fd;
}

struct count {
	uint64_t records, samples;
};

static int count_rec(void *ctx, struct reader_stream *s, uint64_t type, struct rbuf *body)
{
	(void)s;
	(void)body;
	struct count *c = ctx;
	c->records++;
	c->samples += type == REC_SAMPLE;
	return 0;
}

/* Chunk layout of a well-formed file: start offsets and record counts. */
struct layout {
	size_t n;
	size_t start[256], end[256];
	uint64_t records[256];
};

static void layout_of(const uint8_t *d, size_t len, struct layout *l)
{
	memset(l, 0, sizeof(*l));
	size_t off = STRATA_FILE_HDR_SIZE;
	struct wbuf raw;
	wbuf_init(&raw);
	while (off + STRATA_CHUNK_HDR_SIZE <= len && l->n < 256) {
		struct chunk_header h;
		if (chunk_header_parse(d + off, &h) != FMT_OK)
			break;
		l->start[l->n] = off;
		l->end[l->n] = off + STRATA_CHUNK_HDR_SIZE + h.stored_size;
		if (chunk_open(&h, d + off + STRATA_CHUNK_HDR_SIZE, &raw) == FMT_OK) {
			struct rbuf p, body;
			uint64_t type;
			rbuf_init(&p, raw.data, raw.len);
			while (rec_next(&p, &type, &body) == 1)
				l->records[l->n]++;
		}
		off = l->end[l->n++];
	}
	wbuf_free(&raw);
}

static const char *fixture = SRCDIR "/tests/unit/fixtures/small.strata";

static void test_whole_fixture(void)
{
	size_t len;
	uint8_t *d = slurp(fixture, &len);
	if (!CHECK(d != NULL))
		return;
	struct layout l;
	layout_of(d, len, &l);
	CHECK(l.n >= 3);
	CHECK_EQ(l.end[l.n - 1], len);
	char err[256];
	int fd = memfile(d, len);
	struct reader *r = reader_open_fd(fd, err, sizeof(err));
	CHECK(r != NULL);
	struct count c = { 0 };
	CHECK_EQ(reader_poll(r, 1, count_rec, &c, err, sizeof(err)), 0);
	uint64_t total = 0;
	for (size_t i = 0; i < l.n; i++)
		total += l.records[i];
	CHECK_U64(c.records, total);
	CHECK(c.samples > 10);
	const struct reader_diag *dg = reader_diag(r);
	CHECK_EQ(dg->truncated, 0);
	CHECK_EQ(dg->corrupt_chunks, 0);
	CHECK_U64(dg->chunks, l.n);
	CHECK_U64(dg->file_size, len);
	FILE *devnull = fopen("/dev/null", "w");
	CHECK_EQ(reader_report_diag(r, devnull, ""), 0);
	fclose(devnull);
	reader_close(r);
	free(d);
}

/* Every prefix: no crash, whole chunks are read, the cut is reported, and
 * the profile never shows more than the whole file. */
static void test_truncated_everywhere(void)
{
	size_t len;
	uint8_t *d = slurp(fixture, &len);
	if (!CHECK(d != NULL))
		return;
	struct layout l;
	layout_of(d, len, &l);
	char err[256];
	uint64_t prev_samples = 0;
	int bad = 0;
	for (size_t n = 0; n <= len; n++) {
		int fd = memfile(d, n);
		struct reader *r = reader_open_fd(fd, err, sizeof(err));
		if (n < STRATA_FILE_HDR_SIZE) {
			if (r || !strstr(err, n ? "cut short" : "empty"))
				bad++;
			reader_close(r);
			continue;
		}
		if (!r) {
			bad++;
			continue;
		}
		struct count c = { 0 };
		reader_poll(r, 1, count_rec, &c, err, sizeof(err));
		uint64_t want = 0;
		int at_boundary = n == STRATA_FILE_HDR_SIZE;
		for (size_t i = 0; i < l.n; i++) {
			if (l.end[i] <= n)
				want += l.records[i];
			at_boundary |= l.end[i] == n;
		}
		const struct reader_diag *dg = reader_diag(r);
		if (c.records != want || dg->truncated != !at_boundary || dg->corrupt_chunks) {
			if (bad++ < 5)
				fprintf(stderr, "    prefix %zu: %llu records (want %llu), truncated=%d corrupt=%llu\n", n,
					(unsigned long long)c.records, (unsigned long long)want, dg->truncated,
					(unsigned long long)dg->corrupt_chunks);
		}
		reader_close(r);

		/* The model over the same prefix. */
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		struct profile *p = profile_load(path, NULL, err, sizeof(err));
		int any_chunk = n >= l.end[0];
		if (!!p != any_chunk)
			bad++;
		if (p) {
			if (p->nsamples < prev_samples)
				bad++;
			prev_samples = p->nsamples;
			if (!at_boundary && !p->truncated)
				bad++;
			struct agg *a = profile_aggregate(p, NULL, 0);
			if (!a || a->totals[0] != p->totals[0])
				bad++;
			agg_free(a);
			profile_free(p);
		} else if (!strstr(err, "cut short") && !strstr(err, "no profile data")) {
			bad++;
		}
	}
	CHECK_EQ(bad, 0);
	free(d);
}

/* A flipped byte in any chunk, header or payload: that chunk is skipped,
 * every other one is read, and the damage is reported (not a cut). */
static void test_flipped_byte_per_chunk(void)
{
	size_t len;
	uint8_t *d = slurp(fixture, &len);
	if (!CHECK(d != NULL))
		return;
	struct layout l;
	layout_of(d, len, &l);
	uint64_t total = 0;
	for (size_t i = 0; i < l.n; i++)
		total += l.records[i];
	char err[256];
	for (size_t i = 0; i < l.n; i++) {
		/* The chunk magic, the header checksum, a header field, and the
		 * first, middle and last payload bytes. */
		size_t size = l.end[i] - l.start[i];
		size_t where[] = { 0, 4, 16, STRATA_CHUNK_HDR_SIZE, STRATA_CHUNK_HDR_SIZE + (size - STRATA_CHUNK_HDR_SIZE) / 2,
				   size - 1 };
		for (size_t k = 0; k < sizeof(where) / sizeof(where[0]); k++) {
			d[l.start[i] + where[k]] ^= 0x10;
			int fd = memfile(d, len);
			struct reader *r = reader_open_fd(fd, err, sizeof(err));
			struct count c = { 0 };
			reader_poll(r, 1, count_rec, &c, err, sizeof(err));
			const struct reader_diag *dg = reader_diag(r);
			if (c.records != total - l.records[i] || dg->corrupt_chunks != 1 || dg->truncated) {
				fprintf(stderr, "    chunk %zu byte %zu: %llu records (want %llu), corrupt=%llu truncated=%d\n",
					i, where[k], (unsigned long long)c.records,
					(unsigned long long)(total - l.records[i]), (unsigned long long)dg->corrupt_chunks,
					dg->truncated);
				CHECK(!"damaged chunk not skipped cleanly");
			}
			reader_close(r);

			char path[64];
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			struct profile *p = profile_load(path, NULL, err, sizeof(err));
			CHECK(p != NULL);
			if (p) {
				int named = 0;
				for (uint32_t w = 0; w < p->nwarnings; w++)
					named |= strstr(p->warnings[w], "damaged chunk") != NULL;
				CHECK(named);
				CHECK(p->truncated);
				profile_free(p);
			}
			d[l.start[i] + where[k]] ^= 0x10;
		}
	}
	free(d);
}

/* Garbage between chunks (another writer's torn append) is skipped. */
static void test_garbage_between_chunks(void)
{
	size_t len;
	uint8_t *d = slurp(fixture, &len);
	struct layout l;
	layout_of(d, len, &l);
	uint64_t total = 0;
	for (size_t i = 0; i < l.n; i++)
		total += l.records[i];
	/* Insert a partial copy of chunk 1 (a torn write) before chunk 2. */
	size_t cut = (l.end[1] - l.start[1]) / 2;
	uint8_t *t = malloc(len + cut);
	memcpy(t, d, l.start[2]);
	memcpy(t + l.start[2], d + l.start[1], cut);
	memcpy(t + l.start[2] + cut, d + l.start[2], len - l.start[2]);
	char err[256];
	struct reader *r = reader_open_fd(memfile(t, len + cut), err, sizeof(err));
	struct count c = { 0 };
	reader_poll(r, 1, count_rec, &c, err, sizeof(err));
	CHECK_U64(c.records, total);
	CHECK_EQ(reader_diag(r)->corrupt_chunks, 1);
	CHECK_EQ(reader_diag(r)->truncated, 0);
	reader_close(r);
	free(t);
	free(d);
}

static void test_not_profiles(void)
{
	char err[256];
	struct reader *r = reader_open_fd(memfile("", 0), err, sizeof(err));
	CHECK(r == NULL);
	CHECK_CONTAINS(err, "empty");
	const char text[] = "just some text that is certainly not a profile\n";
	r = reader_open_fd(memfile(text, sizeof(text)), err, sizeof(err));
	CHECK(r == NULL);
	CHECK_CONTAINS(err, "not a .strata file");
	const uint8_t elf[64] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
	r = reader_open_fd(memfile(elf, sizeof(elf)), err, sizeof(err));
	CHECK(r == NULL);
	CHECK_CONTAINS(err, "not a .strata file");
	r = reader_open("/nonexistent/strata/file", err, sizeof(err));
	CHECK(r == NULL);
	CHECK_CONTAINS(err, "No such file");
	/* Through the model too. */
	struct profile *p = profile_load("/nonexistent/strata/file", NULL, err, sizeof(err));
	CHECK(p == NULL);
	CHECK_CONTAINS(err, "cannot open");
	/* A header and nothing else. */
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char path[64];
	CHECK_EQ(synth_write(&s, path), 0);
	p = profile_load(path, NULL, err, sizeof(err));
	CHECK(p == NULL);
	CHECK_CONTAINS(err, "no profile data");
	unlink(path);
	synth_free(&s);
}

static void test_newer_major(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR + 1, 0);
	struct rec_dropped dr = { 1, 1 };
	rec_put_dropped(&s.recs, &dr);
	synth_chunk(&s, 1, CHUNK_LAST);
	char err[256];
	struct reader *r = reader_open_fd(memfile(s.file.data, s.file.len), err, sizeof(err));
	CHECK(r == NULL);
	CHECK_CONTAINS(err, "newer strata");
	CHECK_CONTAINS(err, "upgrade");
	synth_free(&s);
}

/* A newer minor version may have a longer file header: the reader skips
 * what it does not know and reads the chunks after it. */
static void test_longer_header(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR + 1);
	struct rec_dropped dr = { 1, 5 };
	rec_put_dropped(&s.recs, &dr);
	synth_chunk(&s, 1, CHUNK_LAST);
	struct wbuf f;
	wbuf_init(&f);
	wbuf_put(&f, s.file.data, STRATA_FILE_HDR_SIZE);
	put_le32(f.data + 12, 64);
	put_le32(f.data + 28, crc32c(0, f.data, 28));
	uint8_t future[32];
	memset(future, 0xee, sizeof(future));
	wbuf_put(&f, future, sizeof(future));
	wbuf_put(&f, s.file.data + STRATA_FILE_HDR_SIZE, s.file.len - STRATA_FILE_HDR_SIZE);
	char err[256];
	struct reader *r = reader_open_fd(memfile(f.data, f.len), err, sizeof(err));
	if (CHECK(r != NULL)) {
		struct count c = { 0 };
		CHECK_EQ(reader_poll(r, 1, count_rec, &c, err, sizeof(err)), 0);
		CHECK_U64(c.records, 1);
		CHECK_EQ(reader_diag(r)->corrupt_chunks, 0);
		reader_close(r);
	} else {
		fprintf(stderr, "    %s\n", err);
	}
	wbuf_free(&f);
	synth_free(&s);
}

/* A newer minor version may add record types: they are skipped and named,
 * everything else reads normally. */
static void test_newer_minor_unknown_types(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR + 1);
	char *argv[] = { "python3", "x.py" };
	struct rec_process pr = { .pid = 10, .start_mono_ns = 1000, .python_version = "3.11.2", .executable = "py",
				  .argc = 2, .argv = argv, .rate_hz = 100, .period_ns = 10000000 };
	rec_put_process(&s.recs, &pr);
	rec_put_raw(&s.recs, 99, "abc", 3);
	struct rec_stack st = { .index = 0 };
	rec_put_stack(&s.recs, &st);
	rec_put_raw(&s.recs, 99, "", 0);
	rec_put_raw(&s.recs, 200, "xyz", 3);
	struct rec_sample smp = { .tid = 10, .dt_ns = 5, .stack = 0, .weight = 1 };
	rec_put_sample(&s.recs, &smp);
	rec_put_raw(&s.recs, REC_CONTROL, "ctl", 3); /* reserved, not decoded by this build */
	synth_chunk(&s, 7, CHUNK_LAST);
	char err[256];
	int fd = memfile(s.file.data, s.file.len);
	struct reader *r = reader_open_fd(fd, err, sizeof(err));
	if (!CHECK(r != NULL))
		return;
	struct count c = { 0 };
	CHECK_EQ(reader_poll(r, 1, count_rec, &c, err, sizeof(err)), 0);
	CHECK_U64(c.records, 3);
	const struct reader_diag *dg = reader_diag(r);
	CHECK_EQ(dg->minor, STRATA_FMT_MINOR + 1);
	CHECK_EQ(dg->nunknown, 3);
	char *buf = NULL;
	size_t blen = 0;
	FILE *m = open_memstream(&buf, &blen);
	CHECK_EQ(reader_report_diag(r, m, "W: "), 1);
	fclose(m);
	CHECK_CONTAINS(buf, "99 (2)");
	CHECK_CONTAINS(buf, "200 (1)");
	CHECK_CONTAINS(buf, "upgrade");
	free(buf);
	reader_close(r);

	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	struct profile *p = profile_load(path, NULL, err, sizeof(err));
	if (CHECK(p != NULL)) {
		CHECK_EQ(p->nsamples, 1);
		CHECK_EQ(p->nwarnings, 1);
		CHECK_CONTAINS(p->warnings[0], "99 (2)");
		CHECK_EQ(p->truncated, 0);
		profile_free(p);
	}
	synth_free(&s);
}

/* Tailing a growing file: a chunk split across two polls is read once, and
 * only the final poll may call an incomplete tail a truncation. */
static void test_incremental(void)
{
	size_t len;
	uint8_t *d = slurp(fixture, &len);
	struct layout l;
	layout_of(d, len, &l);
	uint64_t total = 0;
	for (size_t i = 0; i < l.n; i++)
		total += l.records[i];
	char path[64];
	CHECK_EQ(write_temp(d, STRATA_FILE_HDR_SIZE + 10, path), 0);
	char err[256];
	struct reader *r = reader_open(path, err, sizeof(err));
	if (!CHECK(r != NULL))
		return;
	struct count c = { 0 };
	CHECK_EQ(reader_poll(r, 0, count_rec, &c, err, sizeof(err)), 0);
	CHECK_U64(c.records, 0);
	CHECK_EQ(reader_diag(r)->truncated, 0);
	int fd = open(path, O_WRONLY | O_APPEND);
	size_t mid = l.start[1] + 7;
	CHECK_EQ(write(fd, d + STRATA_FILE_HDR_SIZE + 10, mid - STRATA_FILE_HDR_SIZE - 10),
		 (ssize_t)(mid - STRATA_FILE_HDR_SIZE - 10));
	CHECK_EQ(reader_poll(r, 0, count_rec, &c, err, sizeof(err)), 0);
	CHECK_U64(c.records, l.records[0]);
	CHECK_EQ(write(fd, d + mid, len - mid), (ssize_t)(len - mid));
	close(fd);
	CHECK_EQ(reader_poll(r, 1, count_rec, &c, err, sizeof(err)), 0);
	CHECK_U64(c.records, total);
	CHECK_EQ(reader_diag(r)->truncated, 0);
	reader_close(r);
	unlink(path);
	free(d);
}

/* A stream that never wrote its last chunk, and one with a chunk missing
 * from its middle, are both named. */
static void test_unfinished_and_gaps(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	char *argv[] = { "python3" };
	struct rec_process pr = { .pid = 31, .python_version = "3.11.2", .executable = "py", .argc = 1, .argv = argv };
	rec_put_process(&s.recs, &pr);
	synth_chunk(&s, 1, 0);
	pr.pid = 32;
	rec_put_process(&s.recs, &pr);
	synth_chunk(&s, 2, 0);
	struct rec_dropped dr = { 32, 1 };
	rec_put_dropped(&s.recs, &dr);
	s.seqs[1] += 2; /* lose two chunks of stream 2 */
	synth_chunk(&s, 2, CHUNK_LAST);
	char err[256];
	struct reader *r = reader_open_fd(memfile(s.file.data, s.file.len), err, sizeof(err));
	reader_poll(r, 1, NULL, NULL, err, sizeof(err));
	char *buf = NULL;
	size_t blen = 0;
	FILE *m = open_memstream(&buf, &blen);
	CHECK_EQ(reader_report_diag(r, m, ""), 2);
	fclose(m);
	CHECK_CONTAINS(buf, "process 31 stopped without finishing");
	CHECK_CONTAINS(buf, "process 32: 2 chunk(s) missing");
	free(buf);
	reader_close(r);
	synth_free(&s);
}

int main(void)
{
	RUN(test_whole_fixture);
	RUN(test_truncated_everywhere);
	RUN(test_flipped_byte_per_chunk);
	RUN(test_garbage_between_chunks);
	RUN(test_not_profiles);
	RUN(test_newer_major);
	RUN(test_newer_minor_unknown_types);
	RUN(test_longer_header);
	RUN(test_incremental);
	RUN(test_unfinished_and_gaps);
	return test_summary();
}

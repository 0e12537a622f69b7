/*
 * test_snapshot.c — snapshot_copy (src/common/snapshot.c): a copy of a
 * profile that is still being written must read as a finished profile of
 * everything whole in it, with damage and a half-written tail left out.
 */
#include <fcntl.h>
#include <unistd.h>

#include "test.h"
#include "synth.h"
#include "../../src/common/snapshot.h"
#include "../../src/lib/profile.h"

#define SESSION 1
#define PA 2
#define PB 3

static void session(struct synth *s)
{
	char *argv[] = { "python3", "app.py" };
	struct rec_session r = { .strata_version = "test", .start_mono_ns = 100, .argc = 2, .argv = argv,
				 .rate_hz = 1000, .hostname = "h" };
	rec_put_session(&s->recs, &r);
	synth_chunk(s, SESSION, 0);
}

static void process(struct synth *s, uint32_t pid)
{
	char *argv[] = { "app.py" };
	struct rec_process r = { .pid = pid, .ppid = 1, .start_mono_ns = 100, .python_version = "3.11.2",
				 .executable = "/usr/bin/python3", .argc = 1, .argv = argv, .rate_hz = 1000,
				 .period_ns = 1000000 };
	rec_put_process(&s->recs, &r);
	struct rec_thread t = { .tid = pid, .start_mono_ns = 100, .flags = THREAD_MAIN, .name = "MainThread" };
	rec_put_thread(&s->recs, &t);
	static const uint8_t lt[] = { 0, 1 };
	struct rec_code c = { .index = 0, .firstlineno = 1, .linetable_fmt = LT_LNOTAB, .filename = "app.py",
			      .name = "work", .qualname = "work", .linetable = (uint8_t *)lt, .linetable_len = 2 };
	rec_put_code(&s->recs, &c);
	struct rec_pyframe f = { .code = 0, .lasti = 0 };
	struct rec_stack st = { .index = 0, .npy = 1, .py = &f };
	rec_put_stack(&s->recs, &st);
}

static void samples(struct synth *s, uint32_t tid, int n)
{
	for (int i = 0; i < n; i++) {
		struct rec_sample r = { .tid = tid, .dt_ns = 1000, .stack = 0, .weight = 1 };
		rec_put_sample(&s->recs, &r);
	}
}

/* Copies `src` through snapshot_copy and loads the copy. */
static struct profile *copy_and_load(const struct wbuf *src, int64_t *written, struct reader_diag *diag)
{
	char in_path[64], out_path[64] = "/tmp/strata-snap-XXXXXX", err[256];
	if (write_temp(src->data, src->len, in_path))
		return NULL;
	int in = open(in_path, O_RDONLY);
	int out = mkstemp(out_path);
	*written = snapshot_copy(in, src->len, out, 5000, err, sizeof(err));
	close(in);
	close(out);
	unlink(in_path);
	struct profile *p = NULL;
	if (*written >= 0) {
		struct reader *r = reader_open(out_path, err, sizeof(err));
		if (r) {
			reader_poll(r, 1, NULL, NULL, err, sizeof(err));
			*diag = *reader_diag(r);
			reader_close(r);
		}
		p = profile_load(out_path, NULL, err, sizeof(err));
		if (!p)
			fprintf(stderr, "    load failed: %s\n", err);
	} else {
		fprintf(stderr, "    snapshot failed: %s\n", err);
	}
	unlink(out_path);
	return p;
}

static const struct pprocess *proc(const struct profile *p, uint32_t pid)
{
	for (uint32_t i = 0; i < p->nprocs; i++)
		if (p->procs[i].pid == pid)
			return &p->procs[i];
	return NULL;
}

/* A running process (no last chunk), a finished one, the CLI's session
 * without its end, and a chunk still being written at the end. */
static void test_live_file(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	session(&s);
	process(&s, 10);
	samples(&s, 10, 3);
	synth_chunk(&s, PA, 0);
	process(&s, 20);
	samples(&s, 20, 4);
	struct rec_process_end e = { .end_mono_ns = 900, .reason = END_EXIT, .samples = 4 };
	rec_put_process_end(&s.recs, &e);
	synth_chunk(&s, PB, CHUNK_LAST);
	samples(&s, 10, 2);
	synth_chunk(&s, PA, 0);
	/* Half of A's next chunk: the writer is in the middle of it. */
	size_t before = s.file.len;
	samples(&s, 10, 50);
	synth_chunk(&s, PA, 0);
	s.file.len = before + (s.file.len - before) / 2;

	int64_t w;
	struct reader_diag d;
	memset(&d, 0, sizeof(d));
	struct profile *p = copy_and_load(&s.file, &w, &d);
	if (CHECK(p != NULL)) {
		CHECK(w > 0);
		CHECK_U64(p->nsamples, 3 + 4 + 2);
		CHECK_EQ(p->truncated, 0);
		CHECK_EQ(p->nwarnings, 0);
		for (uint32_t i = 0; i < p->nwarnings; i++)
			fprintf(stderr, "    warning: %s\n", p->warnings[i]);
		const struct pprocess *a = proc(p, 10), *b = proc(p, 20);
		if (CHECK(a && b)) {
			CHECK(a->ended);
			CHECK_EQ(a->end_reason, END_DETACH);
			CHECK_U64(a->end_ns, 5000);
			CHECK(b->ended);
			CHECK_EQ(b->end_reason, END_EXIT);
		}
		CHECK_STR(p->command, "python3 app.py");
		CHECK_EQ(d.truncated, 0);
		CHECK_U64(d.corrupt_chunks, 0);
		profile_free(p);
	}
	synth_free(&s);
}

/* A damaged chunk is left out; the chunks after it are kept. */
static void test_damage_skipped(void)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	session(&s);
	process(&s, 10);
	samples(&s, 10, 3);
	synth_chunk(&s, PA, 0);
	size_t bad = s.file.len;
	samples(&s, 10, 5);
	synth_chunk(&s, PA, 0);
	size_t bad_end = s.file.len;
	samples(&s, 10, 7);
	synth_chunk(&s, PA, 0);
	/* Flip a payload byte of the middle chunk. */
	s.file.data[bad + STRATA_CHUNK_HDR_SIZE + (bad_end - bad - STRATA_CHUNK_HDR_SIZE) / 2] ^= 0x55;

	int64_t w;
	struct reader_diag d;
	memset(&d, 0, sizeof(d));
	struct profile *p = copy_and_load(&s.file, &w, &d);
	if (CHECK(p != NULL)) {
		CHECK_U64(p->nsamples, 3 + 7);
		CHECK_U64(d.corrupt_chunks, 0);
		const struct pprocess *a = proc(p, 10);
		CHECK(a && a->ended && a->end_reason == END_DETACH);
		profile_free(p);
	}
	synth_free(&s);
}

static void test_not_a_profile(void)
{
	char path[64], err[256];
	static const char junk[] = "this is not a profile at all, not even close";
	if (!CHECK(write_temp(junk, sizeof(junk), path) == 0))
		return;
	int in = open(path, O_RDONLY), out = open("/dev/null", O_WRONLY);
	CHECK(snapshot_copy(in, sizeof(junk), out, 1, err, sizeof(err)) < 0);
	CHECK_CONTAINS(err, "header");
	close(in);
	close(out);
	unlink(path);
}

int main(void)
{
	RUN(test_live_file);
	RUN(test_damage_skipped);
	RUN(test_not_a_profile);
	return test_summary();
}

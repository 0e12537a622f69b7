/*
 * test_format.c — the .strata framing and record bodies: every record
 * round-trips, every strict prefix of a body is rejected (and leaks
 * nothing), absurd counts are refused before allocating, and headers and
 * chunks detect damage.
 */
#include "test.h"

#include "../../src/common/format.h"

/* Splits the single record in b into type and body. */
static int one_record(struct wbuf *b, uint64_t *type, struct rbuf *body)
{
	struct rbuf payload;
	rbuf_init(&payload, b->data, b->len);
	int rc = rec_next(&payload, type, body);
	if (rc == 1 && rbuf_left(&payload) != 0)
		return -1;
	return rc;
}

/* Decodes every strict prefix of a body with `get` and expects failure;
 * `fre` releases a successful decode (which must not happen). */
#define CHECK_PREFIXES(type_, T, get, fre)                                                   \
	do {                                                                                  \
		uint64_t t_;                                                                  \
		struct rbuf body_;                                                            \
		CHECK_EQ(one_record(&b, &t_, &body_), 1);                                     \
		CHECK_EQ(t_, type_);                                                          \
		size_t full_ = rbuf_left(&body_);                                             \
		int accepted_ = 0;                                                            \
		for (size_t n_ = 0; n_ < full_; n_++) {                                       \
			struct rbuf pre_;                                                     \
			rbuf_init(&pre_, body_.p, n_);                                        \
			T r_;                                                                 \
			if (get(&pre_, &r_) == 0) {                                           \
				accepted_++;                                                  \
				fre;                                                          \
			}                                                                     \
		}                                                                             \
		CHECK_EQ(accepted_, 0);                                                       \
	} while (0)

static void test_session(void)
{
	char *argv[] = { "python3", "app.py", "--flag" };
	char *events[] = { "cycles" };
	struct rec_session in = { .strata_version = "1.2.3", .start_realtime_ns = 1700000000000000000ull,
				  .start_mono_ns = 123456789, .argc = 3, .argv = argv, .mode = MODE_WALL,
				  .rate_hz = 997, .flags = 5, .nevents = 1, .events = events, .hostname = "host" };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_session(&b, &in);
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(type, REC_SESSION);
	struct rec_session out;
	CHECK_EQ(rec_get_session(&body, &out), 0);
	CHECK_STR(out.strata_version, "1.2.3");
	CHECK_U64(out.start_realtime_ns, in.start_realtime_ns);
	CHECK_U64(out.start_mono_ns, 123456789);
	CHECK_EQ(out.argc, 3);
	CHECK_STR(out.argv[2], "--flag");
	CHECK_EQ(out.mode, MODE_WALL);
	CHECK_EQ(out.rate_hz, 997);
	CHECK_EQ(out.flags, 5);
	CHECK_EQ(out.nevents, 1);
	CHECK_STR(out.events[0], "cycles");
	CHECK_STR(out.hostname, "host");
	rec_free_session(&out);
	CHECK_PREFIXES(REC_SESSION, struct rec_session, rec_get_session, rec_free_session(&r_));
	wbuf_free(&b);
}

static void test_process(void)
{
	char *argv[] = { "python3", "-c", "pass" };
	struct rec_process in = { .pid = 4242, .ppid = 1, .start_mono_ns = 99, .python_version = "3.11.2",
				  .executable = "/usr/bin/python3.11", .argc = 3, .argv = argv, .mode = MODE_CPU,
				  .rate_hz = 1000, .trigger = TRIGGER_POSIX_CPU_TIMER, .period_ns = 1000000,
				  .flags = PROC_CONTINUED };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_process(&b, &in);
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(one_record(&b, &type, &body), 1);
	struct rec_process out;
	CHECK_EQ(rec_get_process(&body, &out), 0);
	CHECK_EQ(out.pid, 4242);
	CHECK_EQ(out.ppid, 1);
	CHECK_U64(out.start_mono_ns, 99);
	CHECK_STR(out.python_version, "3.11.2");
	CHECK_STR(out.executable, "/usr/bin/python3.11");
	CHECK_EQ(out.argc, 3);
	CHECK_STR(out.argv[1], "-c");
	CHECK_EQ(out.trigger, TRIGGER_POSIX_CPU_TIMER);
	CHECK_U64(out.period_ns, 1000000);
	CHECK_EQ(out.flags, PROC_CONTINUED);
	CHECK_EQ(out.nevents, 0);
	CHECK_U64(out.objects_rate, 0);
	rec_free_process(&out);
	/* Every prefix fails but one: the body as format 1.0 wrote it,
	 * without objects_rate (1.1), which reads as rate 0. */
	{
		CHECK_EQ(one_record(&b, &type, &body), 1);
		size_t full = rbuf_left(&body);
		int accepted = 0;
		for (size_t n = 0; n < full; n++) {
			struct rbuf pre;
			rbuf_init(&pre, body.p, n);
			struct rec_process r;
			if (rec_get_process(&pre, &r) == 0) {
				accepted++;
				CHECK_EQ(n, full - 1);
				CHECK_U64(r.objects_rate, 0);
				rec_free_process(&r);
			}
		}
		CHECK_EQ(accepted, 1);
	}
	wbuf_free(&b);
	wbuf_init(&b);
	in.flags = PROC_OBJECTS;
	in.objects_rate = 524288;
	rec_put_process(&b, &in);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_process(&body, &out), 0);
	CHECK_U64(out.objects_rate, 524288);
	CHECK_EQ(out.flags, PROC_OBJECTS);
	rec_free_process(&out);
	wbuf_free(&b);
}

static void test_object_records(void)
{
	struct wbuf b;
	wbuf_init(&b);
	struct rec_alloc a = { .tid = 7, .dt_ns = -5, .stack = 3, .id = 1ull << 35, .size = 1033, .domain = ALLOC_OBJ,
			       .flags = ALLOC_UNTRACKED, .type = 2 };
	rec_put_alloc(&b, &a);
	struct rec_alloc a2;
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(type, REC_ALLOC);
	CHECK_EQ(rec_get_alloc(&body, &a2), 0);
	CHECK_EQ(a2.tid, 7);
	CHECK(a2.dt_ns == -5);
	CHECK_U64(a2.id, 1ull << 35);
	CHECK_U64(a2.size, 1033);
	CHECK_EQ(a2.domain, ALLOC_OBJ);
	CHECK_EQ(a2.flags, ALLOC_UNTRACKED);
	CHECK_EQ(a2.type, 2);
	CHECK_PREFIXES(REC_ALLOC, struct rec_alloc, rec_get_alloc, (void)0);
	wbuf_free(&b);
	wbuf_init(&b);
	struct rec_obj_type t = { .index = 4, .name = "Outer.Inner" }, t2;
	rec_put_obj_type(&b, &t);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_obj_type(&body, &t2), 0);
	CHECK_EQ(t2.index, 4);
	CHECK_STR(t2.name, "Outer.Inner");
	free(t2.name);
	CHECK_PREFIXES(REC_OBJ_TYPE, struct rec_obj_type, rec_get_obj_type, free(r_.name));
	wbuf_free(&b);
	wbuf_init(&b);
	struct rec_free f = { .id = 9, .time_ns = 123 }, f2;
	rec_put_free(&b, &f);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_free(&body, &f2), 0);
	CHECK_U64(f2.id, 9);
	CHECK_U64(f2.time_ns, 123);
	CHECK_PREFIXES(REC_FREE, struct rec_free, rec_get_free, (void)0);
	wbuf_free(&b);
	CHECK(rec_type_known(REC_FREE) && !rec_type_known(REC_CONTROL));
	CHECK_STR(rec_type_name(REC_ALLOC_TYPE), "alloc-type");
}

static void test_small_records(void)
{
	struct wbuf b;
	wbuf_init(&b);
	uint64_t type;
	struct rbuf body;

	struct rec_session_end se = { .end_mono_ns = 77, .status = -9 }, se2;
	rec_put_session_end(&b, &se);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_session_end(&body, &se2), 0);
	CHECK_U64(se2.end_mono_ns, 77);
	CHECK_EQ(se2.status, -9);
	CHECK_PREFIXES(REC_SESSION_END, struct rec_session_end, rec_get_session_end, (void)0);

	wbuf_reset(&b);
	struct rec_process_end pe = { .end_mono_ns = 5, .reason = END_EXEC, .samples = 1000, .dropped = 3 }, pe2;
	rec_put_process_end(&b, &pe);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_process_end(&body, &pe2), 0);
	CHECK_EQ(pe2.reason, END_EXEC);
	CHECK_U64(pe2.samples, 1000);
	CHECK_U64(pe2.dropped, 3);
	CHECK_PREFIXES(REC_PROCESS_END, struct rec_process_end, rec_get_process_end, (void)0);

	wbuf_reset(&b);
	struct rec_thread th = { .tid = 7, .start_mono_ns = 8, .flags = THREAD_MAIN, .name = "MainThread" }, th2;
	rec_put_thread(&b, &th);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_thread(&body, &th2), 0);
	CHECK_EQ(th2.tid, 7);
	CHECK_EQ(th2.flags, THREAD_MAIN);
	CHECK_STR(th2.name, "MainThread");
	rec_free_thread(&th2);
	CHECK_PREFIXES(REC_THREAD, struct rec_thread, rec_get_thread, rec_free_thread(&r_));

	wbuf_reset(&b);
	struct rec_thread_name tn = { .tid = 9, .name = "worker" }, tn2;
	rec_put_thread_name(&b, &tn);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_thread_name(&body, &tn2), 0);
	CHECK_STR(tn2.name, "worker");
	rec_free_thread_name(&tn2);
	CHECK_PREFIXES(REC_THREAD_NAME, struct rec_thread_name, rec_get_thread_name, rec_free_thread_name(&r_));

	wbuf_reset(&b);
	struct rec_thread_end te = { .tid = 9, .end_mono_ns = 10, .samples = 11, .dropped = 12 }, te2;
	rec_put_thread_end(&b, &te);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_thread_end(&body, &te2), 0);
	CHECK_U64(te2.samples, 11);
	CHECK_U64(te2.dropped, 12);
	CHECK_PREFIXES(REC_THREAD_END, struct rec_thread_end, rec_get_thread_end, (void)0);

	wbuf_reset(&b);
	struct rec_dropped d = { .tid = 3, .count = 1u << 20 }, d2;
	rec_put_dropped(&b, &d);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_dropped(&body, &d2), 0);
	CHECK_U64(d2.count, 1u << 20);
	CHECK_PREFIXES(REC_DROPPED, struct rec_dropped, rec_get_dropped, (void)0);
	wbuf_free(&b);
}

static void test_code(void)
{
	uint8_t lt[300];
	for (size_t i = 0; i < sizeof(lt); i++)
		lt[i] = (uint8_t)(i * 7);
	struct rec_code in = { .index = 12, .addr = 0x7f0012345678ull, .firstlineno = 70001,
			       .linetable_fmt = LT_LOCATIONS, .flags = 0x20, .filename = "/src/app.py",
			       .name = "inner", .qualname = "outer.<locals>.inner", .linetable = lt,
			       .linetable_len = sizeof(lt) };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_code(&b, &in);
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(one_record(&b, &type, &body), 1);
	struct rec_code out;
	CHECK_EQ(rec_get_code(&body, &out), 0);
	CHECK_EQ(out.index, 12);
	CHECK_U64(out.addr, 0x7f0012345678ull);
	CHECK_EQ(out.firstlineno, 70001);
	CHECK_EQ(out.linetable_fmt, LT_LOCATIONS);
	CHECK_STR(out.qualname, "outer.<locals>.inner");
	CHECK_EQ(out.linetable_len, sizeof(lt));
	CHECK(out.linetable && memcmp(out.linetable, lt, sizeof(lt)) == 0);
	rec_free_code(&out);
	CHECK_PREFIXES(REC_CODE, struct rec_code, rec_get_code, rec_free_code(&r_));
	wbuf_free(&b);
}

/* 1.2: a stack with task boundaries and awaiter frames, and REC_TASK. */
static void test_task_records(void)
{
	struct rec_pyframe py[4] = { { 5, 40, 0 }, { 2, 8, 0 }, { 7, 3, PYF_AWAITER }, { 8, 9, PYF_AWAITER } };
	struct rec_task_frame tf[2] = { { 1, 3, TASKF_OTHERS }, { 3, 0, 0 } };
	struct rec_stack in = { .index = 9, .npy = 4, .py = py, .ntasks = 2, .tasks = tf, .loop_at = 0 };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_stack(&b, &in);
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(one_record(&b, &type, &body), 1);
	struct rec_stack out;
	CHECK_EQ(rec_get_stack(&body, &out), 0);
	CHECK_EQ(out.ntasks, 2);
	CHECK_EQ(out.tasks[0].at, 1);
	CHECK_EQ(out.tasks[0].task, 3);
	CHECK_EQ(out.tasks[0].flags, TASKF_OTHERS);
	CHECK_EQ(out.tasks[1].at, 3);
	CHECK_EQ(out.py[3].flags, PYF_AWAITER);
	rec_free_stack(&out);
	/* A boundary past the frames is refused. */
	tf[1].at = 4;
	wbuf_reset(&b);
	rec_put_stack(&b, &in);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(rec_get_stack(&body, &out), -1);

	struct rec_task t = { .index = 4, .addr = 0x7f0011223344ull, .name = "client-3" }, ot;
	wbuf_reset(&b);
	rec_put_task(&b, &t);
	CHECK_EQ(one_record(&b, &type, &body), 1);
	CHECK_EQ(type, REC_TASK);
	CHECK_EQ(rec_get_task(&body, &ot), 0);
	CHECK_EQ(ot.index, 4);
	CHECK_U64(ot.addr, 0x7f0011223344ull);
	CHECK_STR(ot.name, "client-3");
	free(ot.name);
	CHECK_STR(rec_type_name(REC_TASK), "task");
	wbuf_free(&b);
}

static void test_stack(void)
{
	struct rec_pyframe py[3] = { { 5, 40, 0 }, { 2, -1, PYF_ENTRY }, { 0, 1000000, 0 } };
	uint64_t native[3] = { 0x7f0000001000ull, 0x7f0000000ff0ull, 0x400123ull };
	struct rec_stack in = { .index = 77, .flags = STACK_PY_TRUNCATED, .npy = 3, .py = py, .py_missing = 900,
				.nnative = 3, .native = native };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_stack(&b, &in);
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(one_record(&b, &type, &body), 1);
	struct rec_stack out;
	CHECK_EQ(rec_get_stack(&body, &out), 0);
	CHECK_EQ(out.index, 77);
	CHECK_EQ(out.flags, STACK_PY_TRUNCATED);
	CHECK_EQ(out.npy, 3);
	CHECK_EQ(out.py[1].lasti, -1);
	CHECK_EQ(out.py[1].flags, PYF_ENTRY);
	CHECK_EQ(out.py[2].lasti, 1000000);
	CHECK_EQ(out.py_missing, 900);
	CHECK_EQ(out.nnative, 3);
	/* Delta-coded addresses, including a step backwards. */
	CHECK_U64(out.native[1], 0x7f0000000ff0ull);
	CHECK_U64(out.native[2], 0x400123ull);
	rec_free_stack(&out);
	CHECK_PREFIXES(REC_STACK, struct rec_stack, rec_get_stack, rec_free_stack(&r_));

	/* A frame count far beyond the bytes present is refused up front. */
	wbuf_reset(&b);
	wbuf_uv(&b, 1);
	wbuf_uv(&b, 0);
	wbuf_uv(&b, 1000000000);
	struct rbuf r;
	rbuf_init(&r, b.data, b.len);
	CHECK_EQ(rec_get_stack(&r, &out), -1);
	/* An instruction offset outside int32. */
	wbuf_reset(&b);
	wbuf_uv(&b, 1);
	wbuf_uv(&b, 0);
	wbuf_uv(&b, 1);
	wbuf_uv(&b, 0);
	wbuf_sv(&b, (int64_t)INT32_MAX + 1);
	wbuf_uv(&b, 0);
	wbuf_uv(&b, 0);
	wbuf_uv(&b, 0);
	rbuf_init(&r, b.data, b.len);
	CHECK_EQ(rec_get_stack(&r, &out), -1);
	wbuf_free(&b);
}

static void test_sample(void)
{
	struct rec_sample in = { .tid = 1234, .dt_ns = -5000, .stack = 3, .weight = 4, .flags = SAMPLE_IDLE,
				 .ncounters = 2, .counters = { 100, UINT64_MAX } };
	struct wbuf b;
	wbuf_init(&b);
	rec_put_sample(&b, &in);
	uint64_t type;
	struct rbuf body;
	CHECK_EQ(one_record(&b, &type, &body), 1);
	struct rec_sample out;
	CHECK_EQ(rec_get_sample(&body, &out), 0);
	CHECK_EQ(out.tid, 1234);
	CHECK_EQ(out.dt_ns, -5000);
	CHECK_EQ(out.weight, 4);
	CHECK_EQ(out.flags, SAMPLE_IDLE);
	CHECK_EQ(out.ncounters, 2);
	CHECK_U64(out.counters[1], UINT64_MAX);
	CHECK_PREFIXES(REC_SAMPLE, struct rec_sample, rec_get_sample, (void)0);
	/* More counters than this build keeps: the extra ones are read past. */
	wbuf_reset(&b);
	wbuf_uv(&b, 1);
	wbuf_sv(&b, 1);
	wbuf_uv(&b, 0);
	wbuf_uv(&b, 1);
	wbuf_uv(&b, 0);
	wbuf_uv(&b, STRATA_MAX_COUNTERS + 2);
	for (int i = 0; i < STRATA_MAX_COUNTERS + 2; i++)
		wbuf_uv(&b, (uint64_t)i + 1);
	struct rbuf r;
	rbuf_init(&r, b.data, b.len);
	CHECK_EQ(rec_get_sample(&r, &out), 0);
	CHECK_EQ(out.ncounters, STRATA_MAX_COUNTERS);
	CHECK_U64(out.counters[STRATA_MAX_COUNTERS - 1], STRATA_MAX_COUNTERS);
	wbuf_free(&b);
}

/* Newer minor versions append fields: an older decoder ignores them. */
static void test_trailing_fields(void)
{
	struct wbuf body, b;
	wbuf_init(&body);
	wbuf_init(&b);
	wbuf_uv(&body, 5);        /* tid */
	wbuf_str(&body, "named"); /* name */
	wbuf_uv(&body, 999);      /* a field from the future */
	wbuf_str(&body, "more");
	rec_put_raw(&b, REC_THREAD_NAME, body.data, body.len);
	uint64_t type;
	struct rbuf r;
	CHECK_EQ(one_record(&b, &type, &r), 1);
	struct rec_thread_name tn;
	CHECK_EQ(rec_get_thread_name(&r, &tn), 0);
	CHECK_EQ(tn.tid, 5);
	CHECK_STR(tn.name, "named");
	rec_free_thread_name(&tn);
	wbuf_free(&body);
	wbuf_free(&b);
}

static void test_record_framing(void)
{
	struct wbuf b;
	wbuf_init(&b);
	struct rec_dropped d = { 1, 2 };
	rec_put_dropped(&b, &d);
	rec_put_dropped(&b, &d);
	struct rbuf payload, body;
	uint64_t type;
	rbuf_init(&payload, b.data, b.len);
	CHECK_EQ(rec_next(&payload, &type, &body), 1);
	CHECK_EQ(rec_next(&payload, &type, &body), 1);
	CHECK_EQ(rec_next(&payload, &type, &body), 0);
	/* A length running past the payload. */
	rbuf_init(&payload, b.data, b.len - 1);
	CHECK_EQ(rec_next(&payload, &type, &body), 1);
	CHECK_EQ(rec_next(&payload, &type, &body), -1);
	wbuf_free(&b);
}

static void test_file_header(void)
{
	uint8_t h[STRATA_FILE_HDR_SIZE];
	struct file_header in = { .major = STRATA_FMT_MAJOR, .minor = 3, .created_ns = 42, .flags = 1 }, out;
	file_header_pack(h, &in);
	CHECK_EQ(file_header_parse(h, sizeof(h), &out), FMT_OK);
	CHECK_EQ(out.major, STRATA_FMT_MAJOR);
	CHECK_EQ(out.minor, 3);
	CHECK_U64(out.created_ns, 42);
	CHECK_EQ(file_header_parse(h, 10, &out), FMT_E_SHORT);
	CHECK_EQ(file_header_parse(h, 4, &out), FMT_E_SHORT);
	h[20] ^= 1;
	CHECK_EQ(file_header_parse(h, sizeof(h), &out), FMT_E_HDRCRC);
	h[20] ^= 1;
	h[0] = 'X';
	CHECK_EQ(file_header_parse(h, sizeof(h), &out), FMT_E_MAGIC);
	in.major = STRATA_FMT_MAJOR + 1;
	file_header_pack(h, &in);
	CHECK_EQ(file_header_parse(h, sizeof(h), &out), FMT_E_VERSION);
	CHECK_EQ(out.major, STRATA_FMT_MAJOR + 1);
}

static void test_chunks(void)
{
	/* One compressible and one incompressible payload. */
	uint8_t raw[5000];
	for (size_t i = 0; i < sizeof(raw); i++)
		raw[i] = (uint8_t)(i % 7);
	uint8_t noise[300];
	uint32_t x = 1;
	for (size_t i = 0; i < sizeof(noise); i++) {
		x = x * 1664525u + 1013904223u;
		noise[i] = (uint8_t)(x >> 24);
	}
	struct wbuf file, out;
	wbuf_init(&file);
	wbuf_init(&out);
	CHECK_EQ(chunk_seal(&file, raw, sizeof(raw), 0xabcdefull, 3, CHUNK_LAST, 3), 0);
	size_t first = file.len;
	CHECK(first < STRATA_CHUNK_HDR_SIZE + sizeof(raw)); /* it compressed */
	CHECK_EQ(chunk_seal(&file, noise, sizeof(noise), 1, 0, 0, 3), 0);

	struct chunk_header h;
	CHECK_EQ(chunk_header_parse(file.data, &h), FMT_OK);
	CHECK_U64(h.stream, 0xabcdefull);
	CHECK_EQ(h.seq, 3);
	CHECK_EQ(h.flags, CHUNK_LAST);
	CHECK_EQ(h.codec, CODEC_ZSTD);
	CHECK_EQ(chunk_open(&h, file.data + STRATA_CHUNK_HDR_SIZE, &out), FMT_OK);
	CHECK_EQ(out.len, sizeof(raw));
	CHECK(memcmp(out.data, raw, sizeof(raw)) == 0);

	CHECK_EQ(chunk_header_parse(file.data + first, &h), FMT_OK);
	CHECK_EQ(h.codec, CODEC_NONE);
	CHECK_EQ(chunk_open(&h, file.data + first + STRATA_CHUNK_HDR_SIZE, &out), FMT_OK);
	CHECK(memcmp(out.data, noise, sizeof(noise)) == 0);

	/* Damage in the payload fails its checksum, in the header the
	 * header's. */
	file.data[first + STRATA_CHUNK_HDR_SIZE + 10] ^= 0x40;
	CHECK_EQ(chunk_open(&h, file.data + first + STRATA_CHUNK_HDR_SIZE, &out), FMT_E_CRC);
	file.data[16] ^= 1;
	CHECK_EQ(chunk_header_parse(file.data, &h), FMT_E_HDRCRC);
	file.data[16] ^= 1;
	/* An implausible size with a valid header checksum. */
	struct chunk_header big = { .stream = 1, .raw_size = STRATA_CHUNK_MAX_RAW + 1, .stored_size = 10 };
	uint8_t hb[STRATA_CHUNK_HDR_SIZE];
	chunk_header_pack(hb, &big);
	CHECK_EQ(chunk_header_parse(hb, &h), FMT_E_SIZE);
	wbuf_free(&file);
	wbuf_free(&out);
}

static void test_names(void)
{
	CHECK_STR(rec_type_name(REC_SAMPLE), "sample");
	CHECK_STR(rec_type_name(99), "unknown");
	CHECK_STR(fmt_strerror(FMT_E_VERSION), "written by a newer strata");
}

int main(void)
{
	RUN(test_session);
	RUN(test_process);
	RUN(test_object_records);
	RUN(test_small_records);
	RUN(test_code);
	RUN(test_stack);
	RUN(test_task_records);
	RUN(test_sample);
	RUN(test_trailing_fields);
	RUN(test_record_framing);
	RUN(test_file_header);
	RUN(test_chunks);
	RUN(test_names);
	return test_summary();
}

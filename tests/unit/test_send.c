/*
 * test_send.c — continuous profiling's pieces that need no network: the
 * settings (URLs, headers, attributes, windows), the spool's names, the
 * default service.name, and the OTLP encoding of a model with Python,
 * native and JIT frames read back field by field (a small protobuf
 * reader here, independent of the encoder). The real collector reads it
 * in tests/func/test_send.py.
 */
#include "test.h"

#include <unistd.h>

#include "synthmodel.h"
#include "../../src/cli/send/sendcfg.h"
#include "../../src/common/spool.h"
#include "../../src/export/otlp.h"

static void test_urls(void)
{
	struct send_cfg c;
	char err[256];
	const char *in[][2] = {
		{ "http://h:4318", "http://h:4318/v1development/profiles" },
		{ "http://h:4318/", "http://h:4318/v1development/profiles" },
		{ "https://user:pw@h/x/v1development/profiles", "https://user:pw@h/x/v1development/profiles" },
		{ "http://[::1]:4318", "http://[::1]:4318/v1development/profiles" },
	};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		send_cfg_init(&c);
		CHECK_EQ(send_cfg_set(&c, "STRATA_SEND", in[i][0], err, sizeof(err)), 0);
		CHECK_STR(c.url, in[i][1]);
		CHECK_EQ(c.kind, SEND_HTTP);
	}
	send_cfg_init(&c);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND", "file:/var/spool/p", err, sizeof(err)), 0);
	CHECK_EQ(c.kind, SEND_FILE);
	CHECK_STR(c.url, "/var/spool/p");
	const char *bad[] = { "ftp://h", "http://", "http:///x", "file:", "h:4318" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(send_cfg_set(&c, "STRATA_SEND", bad[i], err, sizeof(err)), -1);
	char d[256];
	send_url_display("https://user:pw@h:1/p?token=x", d, sizeof(d));
	CHECK_STR(d, "https://h:1/p");
	CHECK_EQ(send_cfg_set(&c, "STRATA_NOT_OURS", "x", err, sizeof(err)), 1);
}

static void test_settings(void)
{
	struct send_cfg c;
	char err[256];
	send_cfg_init(&c);
	CHECK_EQ(c.every_ms, 15000);
	CHECK_EQ(c.queue, 8);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_EVERY", "0.5", err, sizeof(err)), 0);
	CHECK_EQ(c.every_ms, 500);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_EVERY", "0", err, sizeof(err)), -1);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_EVERY", "x", err, sizeof(err)), -1);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_QUEUE", "0", err, sizeof(err)), -1);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_HEADER", "Authorization: Bearer x", err, sizeof(err)), 0);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_HEADER", "no colon", err, sizeof(err)), -1);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_HEADER", "X: a\r\nY: b", err, sizeof(err)), -1);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_ATTRS", "team=a,tier=1", err, sizeof(err)), 0);
	CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_ATTR", "=x", err, sizeof(err)), -1);
	CHECK_EQ(c.nattrs, 2);
	CHECK_STR(c.attrs[1], "tier=1");
	/* Header files are read when the sender starts. */
	char path[] = "/tmp/strata-test-headers-XXXXXX";
	int fd = mkstemp(path);
	if (CHECK(fd >= 0)) {
		const char *txt = "# comment\nX-Scope-OrgID: t1\n\nX-Other: 2\n";
		CHECK(write(fd, txt, strlen(txt)) == (ssize_t)strlen(txt));
		close(fd);
		char at[64];
		snprintf(at, sizeof(at), "@%s", path);
		CHECK_EQ(send_cfg_set(&c, "STRATA_SEND_HEADER", at, err, sizeof(err)), 0);
		char **h;
		int n = send_cfg_headers(&c, &h, err, sizeof(err));
		CHECK_EQ(n, 3);
		if (n == 3) {
			CHECK_STR(h[0], "Authorization: Bearer x");
			CHECK_STR(h[1], "X-Scope-OrgID: t1");
			CHECK_STR(h[2], "X-Other: 2");
		}
		for (int i = 0; i < n; i++)
			free(h[i]);
		free(h);
		unlink(path);
		CHECK_EQ(send_cfg_headers(&c, &h, err, sizeof(err)), -1);
		CHECK_CONTAINS(err, path);
	}
	send_cfg_free(&c);
}

static void test_spool_names(void)
{
	char p[256];
	uint64_t t;
	pid_t pid;
	CHECK_EQ(spool_window_path(p, sizeof(p), "/d", 1795776521465187295ull, 4242, 0), 0);
	CHECK_STR(p, "/d/w-01795776521465187295-4242.strata");
	CHECK(spool_window_parse(strrchr(p, '/') + 1, &t, &pid));
	CHECK_U64(t, 1795776521465187295ull);
	CHECK_EQ(pid, 4242);
	CHECK_EQ(spool_window_path(p, sizeof(p), "/d", 5, 1, 1), 0);
	CHECK_STR(p, "/d/.w-00000000000000000005-1.tmp");
	CHECK(!spool_window_parse(".w-00000000000000000005-1.tmp", &t, &pid));
	CHECK(!spool_window_parse("w-5-1.strata", &t, &pid));
	CHECK(!spool_window_parse("w-00000000000000000005-x.strata", &t, &pid));
	/* Names sort as times do. */
	char a[256], b[256];
	spool_window_path(a, sizeof(a), "/d", 999999999ull, 7, 0);
	spool_window_path(b, sizeof(b), "/d", 1000000000ull, 3, 0);
	CHECK(strcmp(a, b) < 0);
	CHECK_EQ(spool_window_path(p, 10, "/d", 5, 1, 0), -1);
}

static void test_service_names(void)
{
	const char *in[][2] = {
		{ "python3 app.py arg", "app" },
		{ "/usr/bin/python3 -u -X dev /srv/x/svc.py a", "svc" },
		{ "/usr/bin/python3 -W ignore -m pkg.mod --flag", "pkg.mod" },
		{ "python3 -c import x", "python3" },
		{ "/usr/bin/python3 /usr/bin/gunicorn app:app", "gunicorn" },
		{ "", "python" },
	};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		char out[64];
		otlp_service_name(in[i][0], out, sizeof(out));
		CHECK_STR(out, in[i][1]);
	}
}

/* ---- reading the request back ------------------------------------------------ */

struct field {
	uint32_t num, wt;
	uint64_t v;             /* varint / fixed64 */
	const uint8_t *d;       /* length-delimited */
	size_t len;
};

/* The next field of [*p, end); 0 at the end, -1 if malformed. */
static int next_field(const uint8_t **p, const uint8_t *end, struct field *f)
{
	if (*p >= end)
		return 0;
	uint64_t key = 0;
	for (int s = 0;; s += 7) {
		if (*p >= end || s > 63)
			return -1;
		uint8_t b = *(*p)++;
		key |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			break;
	}
	f->num = (uint32_t)(key >> 3);
	f->wt = (uint32_t)(key & 7);
	f->v = 0;
	if (f->wt == 0 || f->wt == 2) {
		for (int s = 0;; s += 7) {
			if (*p >= end || s > 63)
				return -1;
			uint8_t b = *(*p)++;
			f->v |= (uint64_t)(b & 0x7f) << s;
			if (!(b & 0x80))
				break;
		}
		if (f->wt == 2) {
			if (f->v > (uint64_t)(end - *p))
				return -1;
			f->d = *p;
			f->len = f->v;
			*p += f->len;
		}
		return 1;
	}
	if (f->wt == 1) {
		if (end - *p < 8)
			return -1;
		for (int i = 0; i < 8; i++)
			f->v |= (uint64_t)(*p)[i] << (8 * i);
		*p += 8;
		return 1;
	}
	return -1;
}

/* Count of fields numbered num in a message, and the first one. */
static int count_fields(const uint8_t *d, size_t n, uint32_t num, struct field *first)
{
	const uint8_t *p = d, *end = d + n;
	struct field f;
	int c = 0, r;
	while ((r = next_field(&p, end, &f)) == 1)
		if (f.num == num && c++ == 0 && first)
			*first = f;
	return r < 0 ? -1 : c;
}

/* The sum of the (packed) values of every sample of a profile. */
static uint64_t profile_total(const struct field *prof)
{
	const uint8_t *p = prof->d, *end = prof->d + prof->len;
	struct field f;
	uint64_t total = 0;
	while (next_field(&p, end, &f) == 1) {
		if (f.num != 2)
			continue;
		const uint8_t *q = f.d, *qe = f.d + f.len;
		struct field g;
		while (next_field(&q, qe, &g) == 1) {
			if (g.num != 4)
				continue;
			const uint8_t *r = g.d;
			while (r < g.d + g.len) {
				uint64_t v = 0;
				for (int s = 0; r < g.d + g.len; s += 7) {
					uint8_t b = *r++;
					v |= (uint64_t)(b & 0x7f) << s;
					if (!(b & 0x80))
						break;
				}
				total += v;
			}
		}
	}
	return total;
}

static void test_otlp_request(void)
{
	static struct smodel m;
	const uint32_t nf = sizeof(sm_native_funcs) / sizeof(sm_native_funcs[0]);
	const uint32_t ns = sizeof(sm_native_stacks) / sizeof(sm_native_stacks[0]);
	if (!CHECK(smodel_build(&m, sm_native_funcs, nf, sm_native_stacks, ns, sm_native_events) == 0))
		return;
	const char *attrs[] = { "deployment.environment=test" };
	struct otlp_opts o = { .service = "svc", .attrs = attrs, .nattrs = 1 };
	struct pb b = { 0 };
	char err[256];
	CHECK_EQ(otlp_encode(&m.p, &o, &b, err, sizeof(err)), 0);
	/* ExportProfilesServiceRequest: a ResourceProfiles per process, one
	 * dictionary. */
	struct field dict, rp;
	CHECK_EQ(count_fields(b.d, b.len, 1, &rp), (int)m.p.nprocs);
	CHECK_EQ(count_fields(b.d, b.len, 2, &dict), 1);
	/* Every table's entry 0 is the zero value, and is there. */
	for (uint32_t t = 1; t <= 7; t++) {
		struct field f0;
		if (!CHECK(count_fields(dict.d, dict.len, t, &f0) >= 1))
			continue;
		if (t == 4)
			CHECK_EQ(f0.len, 2 + 16 + 2 + 8); /* the zero link: ids of 16 and 8 zero bytes */
		else
			CHECK_EQ(f0.len, 0);
	}
	/* The resource's attributes: service.name first, then ours last. */
	const uint8_t *p = b.d, *end = b.d + b.len;
	struct field f;
	uint64_t totals[SM_NEV] = { 0 };
	int resources = 0;
	while (next_field(&p, end, &f) == 1) {
		if (f.num != 1)
			continue;
		resources++;
		struct field res, sp;
		CHECK_EQ(count_fields(f.d, f.len, 1, &res), 1);
		CHECK_EQ(count_fields(f.d, f.len, 2, &sp), 1);
		struct field kv;
		int nattr = count_fields(res.d, res.len, 1, &kv);
		CHECK(nattr >= 8);
		CHECK(memmem(kv.d, kv.len, "service.name", 12) && memmem(kv.d, kv.len, "svc", 3));
		CHECK(memmem(res.d, res.len, "deployment.environment", 22) != NULL);
		CHECK(memmem(res.d, res.len, "process.pid", 11) != NULL);
		/* One profile per event, each of one sample type. */
		CHECK_EQ(count_fields(sp.d, sp.len, 2, NULL), (int)m.p.nevents);
		const uint8_t *q = sp.d, *qe = sp.d + sp.len;
		struct field pf;
		uint32_t ev = 0;
		while (next_field(&q, qe, &pf) == 1) {
			if (pf.num != 2)
				continue;
			CHECK_EQ(count_fields(pf.d, pf.len, 1, NULL), 1);
			if (ev < SM_NEV)
				totals[ev] += profile_total(&pf);
			ev++;
		}
	}
	CHECK_EQ(resources, (int)m.p.nprocs);
	for (uint32_t e = 0; e < SM_NEV && e < m.p.nevents; e++)
		CHECK_U64(totals[e], m.p.totals[e]);
	/* The string table has the frames' names and the mappings' objects. */
	CHECK(memmem(dict.d, dict.len, "cblas_dgemm", 11) != NULL);
	CHECK(memmem(dict.d, dict.len, SM_LIBBLAS, strlen(SM_LIBBLAS)) != NULL);
	CHECK(memmem(dict.d, dict.len, "profile.frame.type", 18) != NULL);
	free(b.d);
	smodel_free(&m);
}

int main(void)
{
	RUN(test_urls);
	RUN(test_settings);
	RUN(test_spool_names);
	RUN(test_service_names);
	RUN(test_otlp_request);
	return test_summary();
}

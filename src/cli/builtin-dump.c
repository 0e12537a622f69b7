/*
 * builtin-dump.c — `strata dump FILE`: one line per record, in file order.
 * A debugging aid for strata itself and for anyone writing a reader: it
 * shows exactly what the agent wrote, before any interpretation.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "builtin.h"
#include "common/format.h"
#include "common/perfmap.h"
#include "lib/reader.h"

static const char usage_text[] =
	"usage: strata dump [--samples] FILE\n"
	"\n"
	"Lists the records of a .strata file, one per line, grouped by the stream\n"
	"(process) that wrote them. Samples are counted, not listed, unless\n"
	"--samples is given.\n";

struct dump_ctx {
	int samples;
	uint64_t nsamples;
};

static void print_strv(uint32_t n, char **v)
{
	for (uint32_t i = 0; i < n; i++)
		printf("%s%s", i ? " " : "", v[i]);
}

static int dump_record(void *ctx, struct reader_stream *st, uint64_t type, struct rbuf *body)
{
	struct dump_ctx *d = ctx;
	if (type == REC_SAMPLE) {
		d->nsamples++;
		if (!d->samples)
			return 0;
	}
	printf("[%016" PRIx64 "] ", st->id);
	switch (type) {
	case REC_SESSION: {
		struct rec_session s;
		if (rec_get_session(body, &s))
			goto bad;
		printf("session strata=%s host=%s mode=%u rate=%u", s.strata_version, s.hostname, s.mode, s.rate_hz);
		if (s.nevents) {
			printf(" events=");
			print_strv(s.nevents, s.events);
		}
		printf(" cmd=");
		print_strv(s.argc, s.argv);
		rec_free_session(&s);
		break;
	}
	case REC_SESSION_END: {
		struct rec_session_end e;
		if (rec_get_session_end(body, &e))
			goto bad;
		printf("session-end status=%" PRId64, e.status);
		break;
	}
	case REC_PROCESS: {
		struct rec_process p;
		if (rec_get_process(body, &p))
			goto bad;
		printf("process pid=%u ppid=%u python=%s trigger=%u period=%" PRIu64 "ns flags=%#x exe=%s", p.pid, p.ppid,
		       p.python_version, p.trigger, p.period_ns, p.flags, p.executable);
		if (p.nevents) {
			printf(" events=");
			print_strv(p.nevents, p.events);
		}
		if (p.objects_rate)
			printf(" objects-rate=%" PRIu64, p.objects_rate);
		printf(" argv=");
		print_strv(p.argc, p.argv);
		rec_free_process(&p);
		break;
	}
	case REC_PROCESS_END: {
		struct rec_process_end e;
		if (rec_get_process_end(body, &e))
			goto bad;
		printf("process-end reason=%u samples=%" PRIu64 " dropped=%" PRIu64, e.reason, e.samples, e.dropped);
		break;
	}
	case REC_THREAD: {
		struct rec_thread t;
		if (rec_get_thread(body, &t))
			goto bad;
		printf("thread tid=%u flags=%#x name=%s", t.tid, t.flags, t.name);
		rec_free_thread(&t);
		break;
	}
	case REC_THREAD_NAME: {
		struct rec_thread_name t;
		if (rec_get_thread_name(body, &t))
			goto bad;
		printf("thread-name tid=%u name=%s", t.tid, t.name);
		rec_free_thread_name(&t);
		break;
	}
	case REC_THREAD_END: {
		struct rec_thread_end t;
		if (rec_get_thread_end(body, &t))
			goto bad;
		printf("thread-end tid=%u samples=%" PRIu64 " dropped=%" PRIu64, t.tid, t.samples, t.dropped);
		break;
	}
	case REC_CODE: {
		struct rec_code c;
		if (rec_get_code(body, &c))
			goto bad;
		printf("code #%u %s (%s:%u) linetable=%zu bytes fmt=%u", c.index, c.qualname, c.filename,
		       c.firstlineno, c.linetable_len, c.linetable_fmt);
		rec_free_code(&c);
		break;
	}
	case REC_STACK: {
		struct rec_stack s;
		if (rec_get_stack(body, &s))
			goto bad;
		printf("stack #%u flags=%#x py=[", s.index, s.flags);
		for (uint32_t i = 0; i < s.npy; i++)
			printf("%s#%u@%d%s%s", i ? " " : "", s.py[i].code, s.py[i].lasti,
			       s.py[i].flags & PYF_ENTRY ? "E" : "", s.py[i].flags & PYF_AWAITER ? "A" : "");
		printf("]");
		if (s.py_missing)
			printf(" +%u missing", s.py_missing);
		if (s.nnative) {
			printf(" native=[");
			for (uint32_t i = 0; i < s.nnative; i++)
				printf("%s%#" PRIx64, i ? " " : "", s.native[i]);
			printf("]");
		}
		if (s.ntasks) {
			printf(" tasks=[");
			for (uint32_t i = 0; i < s.ntasks; i++)
				printf("%s%u:task#%u%s", i ? " " : "", s.tasks[i].at, s.tasks[i].task,
				       s.tasks[i].flags & TASKF_OTHERS ? "+others" : "");
			printf("]");
		}
		if (s.loop_at)
			printf(" loop_at=%u", s.loop_at);
		rec_free_stack(&s);
		break;
	}
	case REC_SAMPLE: {
		struct rec_sample s;
		if (rec_get_sample(body, &s))
			goto bad;
		printf("sample tid=%u dt=%" PRId64 " stack=#%u weight=%u flags=%#x", s.tid, s.dt_ns, s.stack, s.weight,
		       s.flags);
		if (s.ncounters) {
			printf(" counters=[");
			for (uint32_t i = 0; i < s.ncounters; i++)
				printf("%s%" PRIu64, i ? " " : "", s.counters[i]);
			printf("]");
		}
		break;
	}
	case REC_DROPPED: {
		struct rec_dropped dr;
		if (rec_get_dropped(body, &dr))
			goto bad;
		printf("dropped tid=%u count=%" PRIu64, dr.tid, dr.count);
		break;
	}
	case REC_MODULE: {
		struct rec_module m;
		if (rec_get_module(body, &m))
			goto bad;
		printf("module %#" PRIx64 "-%#" PRIx64 " off=%#" PRIx64 " bias=%#" PRIx64 " flags=%#x build-id=",
		       m.start, m.end, m.offset, m.bias, m.flags);
		for (size_t i = 0; i < m.build_id_len; i++)
			printf("%02x", m.build_id[i]);
		printf("%s path=%s", m.build_id_len ? "" : "-", m.path);
		if (m.image_len)
			printf(" image=%zu bytes", m.image_len);
		rec_free_module(&m);
		break;
	}
	case REC_PERFMAP: {
		struct perfmap_entry *pe;
		uint32_t n;
		if (rec_get_perfmap(body, &pe, &n))
			goto bad;
		printf("perf-map %u entries", n);
		for (uint32_t i = 0; i < n; i++)
			printf("\n    %#" PRIx64 "-%#" PRIx64 " %s", pe[i].start, pe[i].start + pe[i].size, pe[i].name);
		perfmap_entries_free(pe, n);
		break;
	}
	case REC_JIT_IMAGE: {
		struct rec_jit_image j;
		if (rec_get_jit_image(body, &j))
			goto bad;
		printf("jit-image #%" PRIu64 " %#" PRIx64 "-%#" PRIx64 " t=%" PRIu64 " flags=%#x image=%zu bytes", j.id,
		       j.start, j.end, j.time_ns, j.flags, j.image_len);
		rec_free_jit_image(&j);
		break;
	}
	case REC_JIT_UNLOAD: {
		struct rec_jit_unload u;
		if (rec_get_jit_unload(body, &u))
			goto bad;
		printf("jit-unload #%" PRIu64 " t=%" PRIu64, u.id, u.time_ns);
		break;
	}
	case REC_EVENT_DESC: {
		struct rec_event_desc e;
		if (rec_get_event_desc(body, &e))
			goto bad;
		printf("event-desc #%u %s type=%u config=%#" PRIx64 " period=%" PRIu64 " flags=%#x", e.index, e.name,
		       e.type, e.config, e.period, e.flags);
		rec_free_event_desc(&e);
		break;
	}
	case REC_TASK: {
		struct rec_task t;
		if (rec_get_task(body, &t))
			goto bad;
		printf("task #%u %s (%#" PRIx64 ")", t.index, t.name, t.addr);
		free(t.name);
		break;
	}
	case REC_OBJ_TYPE: {
		struct rec_obj_type t;
		if (rec_get_obj_type(body, &t))
			goto bad;
		printf("obj-type #%u %s", t.index, t.name);
		free(t.name);
		break;
	}
	case REC_ALLOC: {
		struct rec_alloc a;
		if (rec_get_alloc(body, &a))
			goto bad;
		printf("alloc tid=%u dt=%" PRId64 " stack=%u id=%" PRIu64 " size=%" PRIu64 " domain=%s type=%u flags=%#x",
		       a.tid, a.dt_ns, a.stack, a.id, a.size, alloc_domain_name(a.domain), a.type, a.flags);
		break;
	}
	case REC_ALLOC_TYPE: {
		struct rec_alloc_type a;
		if (rec_get_alloc_type(body, &a))
			goto bad;
		printf("alloc-type id=%" PRIu64 " type=%u", a.id, a.type);
		break;
	}
	case REC_FREE: {
		struct rec_free f;
		if (rec_get_free(body, &f))
			goto bad;
		printf("free id=%" PRIu64 " t=%" PRIu64, f.id, f.time_ns);
		break;
	}
	default:
		printf("%s (type %" PRIu64 ", %zu bytes)", rec_type_name(type), type, rbuf_left(body));
	}
	printf("\n");
	return 0;
bad:
	printf("%s: malformed record\n", rec_type_name(type));
	return 0;
}

int cmd_dump(int argc, char **argv)
{
	struct dump_ctx d = { 0 };
	static const struct option longopts[] = {
		{ "samples", no_argument, 0, 's' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "sh", longopts, NULL)) != -1) {
		if (c == 's')
			d.samples = 1;
		else if (c == 'h') {
			fputs(usage_text, stdout);
			return 0;
		} else
			die_usage(usage_text);
	}
	if (optind != argc - 1)
		die_usage(usage_text);
	const char *path = argv[optind];
	char err[512];
	struct reader *r = reader_open(path, err, sizeof(err));
	if (!r) {
		errorf("%s: %s", path, err);
		return 1;
	}
	const struct reader_diag *diag = reader_diag(r);
	printf("format %u.%u\n", diag->major, diag->minor);
	int rc = reader_poll(r, 1, dump_record, &d, err, sizeof(err));
	if (rc < 0)
		errorf("%s: %s", path, err);
	printf("%" PRIu64 " sample records, %" PRIu64 " chunks\n", d.nsamples, diag->chunks);
	reader_report_diag(r, stderr, "strata: warning: ");
	reader_close(r);
	return rc < 0 ? 1 : 0;
}

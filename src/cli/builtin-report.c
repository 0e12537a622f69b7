/*
 * builtin-report.c — `strata report FILE`: the hottest functions and lines,
 * and where the samples went by thread and process, as a terminal table or
 * as one JSON object (--json). docs/report.md describes every option and
 * column.
 *
 * Everything shown comes from the profile model (profile_load +
 * profile_aggregate); report only filters, sorts and lays out. This file
 * holds the options and which threads and processes are selected; the
 * tables are report-text.c (which sanitises text from the profiled
 * program: names, paths, source lines) and the JSON report-json.c, both
 * declared in report.h; the types table is report-types.c.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "lib/json.h"
#include "lib/profile.h"
#include "report.h"

static const char usage_text[] =
	"usage: strata report [options] FILE\n"
	"\n"
	"Shows where a recorded profile spent its samples: the hottest functions\n"
	"(self and total), the hottest lines, and a summary per thread and process.\n"
	"\n"
	"options:\n"
	"      --json           print one JSON object instead of tables\n"
	"  -n, --limit N        rows per table (default: 20; with --json: all)\n"
	"  -s, --sort KEY       order functions and lines by self (default) or total\n"
	"  -e, --event NAME     order by this recorded event instead of samples\n"
	"  -p, --pid PID        only samples of process PID\n"
	"  -t, --tid TID        only samples of thread TID\n"
	"      --no-idle        wall mode: leave out samples of blocked threads\n"
	"      --keep-interpreter  native stacks: keep CPython's own frames; asyncio:\n"
	"                       keep the event loop's frames under each task\n"
	"      --no-inline      native stacks: no frames for inlined functions (their\n"
	"                       time goes to the function they are inlined into)\n"
	"      --type NAME      --objects: only allocations of type NAME (dict, Foo,\n"
	"                       [PyMem_Malloc], ...: see the types table)\n"
	"      --task NAME      asyncio: only the samples of task NAME (its own frames,\n"
	"                       running or waiting: see the tasks table, docs/async.md)\n"
	"  -h, --help           show this help\n"
	"\n"
	"self: samples whose innermost frame is in the function (or line).\n"
	"total: samples with the function anywhere on the stack, once per sample.\n";

/* ---- selection -------------------------------------------------------- */

static int thread_selected(const struct pthread_info *t, const struct report_opts *o)
{
	return (!o->pid || t->pid == o->pid) && (!o->tid || t->tid == o->tid);
}

int proc_selected(const struct profile *p, uint32_t i, const struct report_opts *o)
{
	if (p->procs[i].flags & PROC_UNSUPPORTED)
		return 0;
	if (o->pid && p->procs[i].pid != o->pid)
		return 0;
	if (o->tid) {
		for (uint32_t t = 0; t < p->nthreads; t++)
			if (p->threads[t].process == i && p->threads[t].tid == o->tid)
				return 1;
		return 0;
	}
	return 1;
}

/* Filtered samples per process, from the per-thread sums. */
uint64_t proc_samples(const struct profile *p, const struct agg *a, uint32_t proc)
{
	uint64_t s = 0;
	for (uint32_t t = 0; t < p->nthreads; t++)
		if (p->threads[t].process == proc)
			s += a->thread_samples[t];
	return s;
}

uint32_t proc_threads(const struct profile *p, uint32_t proc)
{
	uint32_t n = 0;
	for (uint32_t t = 0; t < p->nthreads; t++)
		n += p->threads[t].process == proc;
	return n;
}

/* Threads in the order shown: most samples first. */
static int thread_cmp(const void *x, const void *y, void *ctx)
{
	const struct agg *a = ((const void *const *)ctx)[1];
	const struct profile *p = ((const void *const *)ctx)[0];
	uint32_t i = *(const uint32_t *)x, k = *(const uint32_t *)y;
	uint64_t si = a->thread_samples[i], sk = a->thread_samples[k];
	if (si != sk)
		return si > sk ? -1 : 1;
	const struct pthread_info *ti = &p->threads[i], *tk = &p->threads[k];
	if (ti->pid != tk->pid)
		return ti->pid < tk->pid ? -1 : 1;
	return ti->tid < tk->tid ? -1 : ti->tid > tk->tid;
}

uint32_t *selected_threads(const struct profile *p, const struct agg *a, const struct report_opts *o,
			   uint32_t *n)
{
	uint32_t *ids = malloc((p->nthreads + 1) * sizeof(*ids));
	*n = 0;
	if (!ids)
		return NULL;
	for (uint32_t t = 0; t < p->nthreads; t++)
		if (thread_selected(&p->threads[t], o) && !(p->procs[p->threads[t].process].flags & PROC_UNSUPPORTED))
			ids[(*n)++] = t;
	const void *ctx[2] = { p, a };
	qsort_r(ids, *n, sizeof(*ids), thread_cmp, ctx);
	return ids;
}

uint32_t count_procs(const struct profile *p, const struct report_opts *o)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		n += proc_selected(p, i, o);
	return n;
}

double duration_s(const struct profile *p)
{
	return p->end_ns > p->start_ns ? (double)(p->end_ns - p->start_ns) / 1e9 : 0.0;
}

/* ---- command ----------------------------------------------------------- */

int cmd_report(int argc, char **argv)
{
	struct report_opts o = { .limit = -1 };
	static const struct option longopts[] = {
		{ "json", no_argument, 0, 'j' },
		{ "limit", required_argument, 0, 'n' },
		{ "sort", required_argument, 0, 's' },
		{ "event", required_argument, 0, 'e' },
		{ "pid", required_argument, 0, 'p' },
		{ "tid", required_argument, 0, 't' },
		{ "no-idle", no_argument, 0, 'I' },
		{ "keep-interpreter", no_argument, 0, 'K' },
		{ "no-inline", no_argument, 0, 'N' },
		{ "type", required_argument, 0, 'T' },
		{ "task", required_argument, 0, 'A' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	uint32_t v;
	while ((c = getopt_long(argc, argv, "n:s:e:p:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.json = 1;
			break;
		case 'n':
			if (parse_u32(optarg, 0, UINT32_MAX, &v) || v > INT32_MAX) {
				errorf("invalid --limit '%s': expected a number of rows (0 = all)", optarg);
				return 2;
			}
			o.limit = (int)v;
			break;
		case 's':
			if (!strcmp(optarg, "self"))
				o.by_total = 0;
			else if (!strcmp(optarg, "total"))
				o.by_total = 1;
			else {
				errorf("invalid --sort '%s': expected self or total", optarg);
				return 2;
			}
			break;
		case 'p':
			if (parse_u32(optarg, 1, UINT32_MAX, &o.pid)) {
				errorf("invalid --pid '%s'", optarg);
				return 2;
			}
			break;
		case 't':
			if (parse_u32(optarg, 1, UINT32_MAX, &o.tid)) {
				errorf("invalid --tid '%s'", optarg);
				return 2;
			}
			break;
		case 'I':
			o.no_idle = 1;
			break;
		case 'K':
			o.keep_interpreter = 1;
			break;
		case 'N':
			o.no_inline = 1;
			break;
		case 'T':
			o.type = optarg;
			break;
		case 'A':
			o.task = optarg;
			break;
		case 'e':
			o.event_name = optarg;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			die_usage(usage_text);
		}
	}
	if (optind != argc - 1) {
		errorf(optind >= argc ? "no profile file given" : "too many arguments");
		die_usage(usage_text);
	}
	o.path = argv[optind];
	/* Tables default to 20 rows; JSON is for programs: everything. */
	if (o.limit < 0)
		o.limit = o.json ? 0 : 20;

	struct load_opts lo = { .keep_interpreter = o.keep_interpreter, .no_inline = o.no_inline };
	struct profile *p = cli_load_profile(o.path, &lo, o.type);
	if (!p)
		return 1;
	char terr[512];
	if (o.task && profile_filter_task(p, o.task, terr, sizeof(terr))) {
		errorf("%s: %s", o.path, terr);
		profile_free(p);
		return 1;
	}
	/* Allocations carry no time samples: order by their bytes. */
	if (o.type && !o.event_name)
		o.event = p->obj_event + 1;
	if (o.event_name) {
		for (o.event = 0; o.event < p->nevents && strcmp(p->event_names[o.event], o.event_name); o.event++)
			;
		if (o.event == p->nevents) {
			errorf("%s: the profile has no event '%s'", o.path, o.event_name);
			profile_free(p);
			return 1;
		}
	}
	struct agg_filter f = { .pid = o.pid, .tid = o.tid, .exclude_idle = o.no_idle };
	struct agg *a = profile_aggregate(p, &f, o.event);
	if (!a) {
		errorf("%s: out of memory", o.path);
		profile_free(p);
		return 1;
	}
	if (o.by_total)
		agg_sort(a, o.event, 1);
	if ((o.pid || o.tid) && a->nsamples == 0) {
		int known = 0;
		for (uint32_t t = 0; t < p->nthreads; t++)
			known |= thread_selected(&p->threads[t], &o);
		if (!known)
			warnf("%s: no %s %u in this profile", o.path, o.tid ? "thread" : "process", o.tid ? o.tid : o.pid);
	}
	int rc = 0;
	if (o.json) {
		struct json j;
		json_init(&j, stdout, 2);
		report_json(p, a, &o, &j);
		if (json_finish(&j)) {
			errorf("writing the report failed");
			rc = 1;
		}
	} else {
		report_text(p, a, &o);
	}
	if (fflush(stdout) || ferror(stdout)) {
		if (!rc)
			errorf("writing the report failed: %s", strerror(errno));
		rc = 1;
	}
	agg_free(a);
	profile_free(p);
	return rc;
}

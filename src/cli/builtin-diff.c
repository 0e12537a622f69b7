/*
 * builtin-diff.c — `strata diff BASE NEW`: what got slower between two
 * profiles, by function, line or file, as a terminal table or as one JSON
 * object, with an exit status a CI job can gate on. docs/diff.md
 * describes every option and column.
 *
 * The comparison is src/lib/diff.c (shared with convert --diff and
 * annotate --diff); this file holds the options, loads both profiles,
 * refuses profiles that do not measure the same thing, and hands the rows
 * to diff-out.c.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "diff-out.h"
#include "lib/diff.h"
#include "lib/profile.h"

/* Exit statuses besides 0 (compared), 1 (a profile could not be read)
 * and 2 (bad usage). */
#define EXIT_INCOMPATIBLE 3
#define EXIT_ABOVE 4

static const char usage_text[] =
	"usage: strata diff [options] BASE NEW\n"
	"\n"
	"Compares two profiles of one program: the functions (or lines, or files)\n"
	"whose share of the samples grew most from BASE to NEW come first, those\n"
	"that shrank most last, each with both values, the change in percentage\n"
	"points and the ratio. Functions only in NEW are marked new, those only in\n"
	"BASE gone. Code is matched by what it is, not where it was: Python by file\n"
	"(two checkouts in different directories match), qualified name and line;\n"
	"native code by object name and symbol; JIT code by its name.\n"
	"\n"
	"options:\n"
	"  -n, --limit N          rows shown (default: 20; 0 = all; --json: all)\n"
	"  -b, --by WHAT          function (default), line or file\n"
	"  -s, --sort self|total  compare self cost (default) or total cost\n"
	"  -a, --absolute         compare amounts, not shares: time (samples x the\n"
	"                         sampling period), or with -e the event's count\n"
	"  -e, --event NAME       compare this recorded event (an -e counter,\n"
	"                         alloc-bytes, live-bytes, ...; default: samples)\n"
	"  -p, --pid PID[,PID]    only process PID; two: BASE's, then NEW's\n"
	"  -t, --tid TID[,TID]    only thread TID; two: BASE's, then NEW's\n"
	"      --thread NAME      only threads named NAME (MainThread, ...)\n"
	"      --task NAME        only samples of asyncio task NAME ([task NAME] frames)\n"
	"      --no-idle          wall mode: leave out samples of blocked threads\n"
	"      --strip-prefix DIR remove DIR from the start of source paths of either\n"
	"                         profile before matching them (repeatable)\n"
	"      --keep-interpreter native stacks: keep CPython's own frames\n"
	"      --no-inline        native stacks: no frames for inlined functions\n"
	"      --fail-above PCT   exit 4 when a row grew by more than PCT points (of\n"
	"                         the share; with --absolute, of BASE's total)\n"
	"      --json             print one JSON object instead of the table\n"
	"  -h, --help             show this help\n"
	"\n"
	"self: samples whose innermost frame is in the function; total: samples with\n"
	"the function anywhere on the stack, once per sample. Shares are of each\n"
	"profile's own samples, so runs of different lengths or rates compare.\n"
	"\n"
	"exit status: 0 compared (and nothing grew more than --fail-above); 1 a\n"
	"profile could not be read; 2 bad usage; 3 the profiles do not measure the\n"
	"same thing (cpu vs wall mode, different -e sampling events, an event one\n"
	"of them lacks): one line says what differs; 4 something grew by more than\n"
	"--fail-above.\n";

/* "N" or "N,M": one value for both profiles, or BASE's and NEW's. */
static int parse_pair(const char *s, uint32_t out[2])
{
	const char *comma = strchr(s, ',');
	if (!comma)
		return parse_u32(s, 1, UINT32_MAX, &out[0]) ? -1 : (out[1] = out[0], 0);
	char first[32];
	size_t n = (size_t)(comma - s);
	if (n == 0 || n >= sizeof(first))
		return -1;
	memcpy(first, s, n);
	first[n] = 0;
	return parse_u32(first, 1, UINT32_MAX, &out[0]) || parse_u32(comma + 1, 1, UINT32_MAX, &out[1]) ? -1 : 0;
}

static int parse_pct(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < 0)
		return -1;
	*out = v;
	return 0;
}

int cmd_diff(int argc, char **argv)
{
	struct diff_query q = { 0 };
	struct diff_cli d = { .limit = -1 };
	struct load_opts lo = { 0 };
	const char *strip[64];
	struct diff_match_opts mo = { strip, 0 };
	uint32_t pid[2] = { 0, 0 }, tid[2] = { 0, 0 };
	const char *thread = NULL, *task = NULL, *event = NULL;
	int json = 0, no_idle = 0;
	static const struct option longopts[] = {
		{ "limit", required_argument, 0, 'n' },
		{ "by", required_argument, 0, 'b' },
		{ "sort", required_argument, 0, 's' },
		{ "absolute", no_argument, 0, 'a' },
		{ "event", required_argument, 0, 'e' },
		{ "pid", required_argument, 0, 'p' },
		{ "tid", required_argument, 0, 't' },
		{ "thread", required_argument, 0, 'T' },
		{ "task", required_argument, 0, 'K' },
		{ "no-idle", no_argument, 0, 'I' },
		{ "strip-prefix", required_argument, 0, 'S' },
		{ "keep-interpreter", no_argument, 0, 'k' },
		{ "no-inline", no_argument, 0, 'N' },
		{ "fail-above", required_argument, 0, 'F' },
		{ "json", no_argument, 0, 'j' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	uint32_t v;
	while ((c = getopt_long(argc, argv, "n:b:s:ae:p:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_u32(optarg, 0, UINT32_MAX, &v) || v > INT32_MAX) {
				errorf("invalid --limit '%s': expected a number of rows (0 = all)", optarg);
				return 2;
			}
			d.limit = (int)v;
			break;
		case 'b':
			if (!strcmp(optarg, "function") || !strcmp(optarg, "func"))
				q.by = DIFF_BY_FUNCTION;
			else if (!strcmp(optarg, "line"))
				q.by = DIFF_BY_LINE;
			else if (!strcmp(optarg, "file"))
				q.by = DIFF_BY_FILE;
			else {
				errorf("invalid --by '%s': expected function, line or file", optarg);
				return 2;
			}
			break;
		case 's':
			if (strcmp(optarg, "self") && strcmp(optarg, "total")) {
				errorf("invalid --sort '%s': expected self or total", optarg);
				return 2;
			}
			q.by_total = !strcmp(optarg, "total");
			break;
		case 'a':
			q.absolute = 1;
			break;
		case 'e':
			event = optarg;
			break;
		case 'p':
			if (parse_pair(optarg, pid)) {
				errorf("invalid --pid '%s': expected PID, or BASE_PID,NEW_PID", optarg);
				return 2;
			}
			break;
		case 't':
			if (parse_pair(optarg, tid)) {
				errorf("invalid --tid '%s': expected TID, or BASE_TID,NEW_TID", optarg);
				return 2;
			}
			break;
		case 'T':
			thread = optarg;
			break;
		case 'K':
			task = optarg;
			break;
		case 'I':
			no_idle = 1;
			break;
		case 'S':
			if (mo.nstrip == sizeof(strip) / sizeof(strip[0])) {
				errorf("too many --strip-prefix (at most %zu)", sizeof(strip) / sizeof(strip[0]));
				return 2;
			}
			if (!*optarg) {
				errorf("--strip-prefix needs a directory");
				return 2;
			}
			strip[mo.nstrip++] = optarg;
			break;
		case 'k':
			lo.keep_interpreter = 1;
			break;
		case 'N':
			lo.no_inline = 1;
			break;
		case 'F':
			if (parse_pct(optarg, &d.fail_above)) {
				errorf("invalid --fail-above '%s': expected percentage points (e.g. 2 or 0.5)", optarg);
				return 2;
			}
			d.fail_set = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			die_usage(usage_text);
		}
	}
	if (argc - optind != 2) {
		errorf(argc - optind < 2 ? "expected two profiles: BASE and NEW" : "too many arguments");
		die_usage(usage_text);
	}
	if (d.limit < 0)
		d.limit = json ? 0 : 20;
	d.path[0] = argv[optind];
	d.path[1] = argv[optind + 1];

	struct profile *p[2] = { NULL, NULL };
	struct diff_match *m = NULL;
	struct diff_result *r = NULL;
	struct diff_check chk;
	int rc = 1;
	char why[512];
	for (int s = 0; s < 2; s++)
		if (!(p[s] = cli_load_profile(d.path[s], &lo, NULL)))
			goto done;
	const struct profile *cp[2] = { p[0], p[1] };
	if (diff_check(cp, d.path, event, q.absolute, &chk, why, sizeof(why))) {
		errorf("cannot compare: %s", why);
		rc = EXIT_INCOMPATIBLE;
		goto done;
	}
	for (int s = 0; s < 2; s++) {
		q.f[s] = (struct diff_filter){ .pid = pid[s], .tid = tid[s], .thread = thread, .task = task,
					       .exclude_idle = no_idle };
		if (diff_filter_check(p[s], &q.f[s], why, sizeof(why))) {
			errorf("%s: %s%s", d.path[s], why,
			       (pid[s] || tid[s]) && pid[0] == pid[1] && tid[0] == tid[1]
				       ? " (process and thread ids differ between runs: give BASE's and NEW's, "
					 "--pid 100,200, or use --thread NAME)"
				       : "");
			rc = 2;
			goto done;
		}
	}
	if (!(m = diff_match_build(p[0], p[1], &mo)) || !(r = diff_compare(cp, m, &chk, &q))) {
		errorf("out of memory");
		goto done;
	}
	for (int s = 0; s < 2; s++)
		if (!r->all[s])
			warnf("%s: no samples%s", d.path[s], q.f[s].pid || q.f[s].tid || thread || task || no_idle
									 ? " pass the filters" : "");
	d.p[0] = p[0];
	d.p[1] = p[1];
	d.m = m;
	d.c = &chk;
	d.q = &q;
	d.r = r;
	d.event = event ? event : "samples";
	for (uint32_t i = 0; i < r->nrows; i++)
		d.nfailed += d.fail_set && r->rows[i].points > d.fail_above;
	rc = 0;
	if (json) {
		if (diff_json(&d)) {
			errorf("writing the comparison failed");
			rc = 1;
		}
	} else {
		diff_text(&d);
	}
	if (fflush(stdout) || ferror(stdout)) {
		if (!rc)
			errorf("writing the comparison failed: %s", strerror(errno));
		rc = 1;
	}
	if (!rc && d.nfailed)
		rc = EXIT_ABOVE;
done:
	diff_result_free(r);
	diff_match_free(m);
	profile_free(p[0]);
	profile_free(p[1]);
	return rc;
}

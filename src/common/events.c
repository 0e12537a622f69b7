/*
 * events.c — the event table and the perf_event_open glue; see events.h.
 *
 * Default periods aim at roughly the cost of the default 1000 Hz CPU-time
 * sampling on a busy thread (a few hundred to a few thousand samples per
 * second) while keeping rare events (major faults, migrations) sampled one
 * by one. `-c` overrides them.
 */
#include "events.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const struct event_info table[] = {
	{ "cycles", "cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, EVC_HARDWARE, 0, 3000000,
	  "CPU cycles" },
	{ "instructions", "", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, EVC_HARDWARE, 0, 3000000,
	  "instructions retired" },
	{ "cache-references", "", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, EVC_HARDWARE, 0, 100000,
	  "last-level cache accesses" },
	{ "cache-misses", "", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, EVC_HARDWARE, 0, 10000,
	  "last-level cache misses" },
	{ "branch-instructions", "branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, EVC_HARDWARE, 0,
	  1000000, "branch instructions retired" },
	{ "branch-misses", "", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, EVC_HARDWARE, 0, 10000,
	  "mispredicted branches" },
	{ "cpu-clock", "", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, EVC_SOFTWARE, EVS_CLOCK, 0,
	  "CPU time in ns (a kernel timer)" },
	{ "task-clock", "", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, EVC_SOFTWARE, EVS_CLOCK, 0,
	  "CPU time in ns of the thread (the default trigger)" },
	{ "page-faults", "faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, EVC_SOFTWARE, 0, 100,
	  "page faults, minor and major" },
	{ "minor-faults", "", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, EVC_SOFTWARE, 0, 100,
	  "page faults served without I/O" },
	{ "major-faults", "", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, EVC_SOFTWARE, 0, 1,
	  "page faults that waited for I/O" },
	{ "context-switches", "cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, EVC_SOFTWARE,
	  EVS_KERNEL | EVS_SELF_FEEDING, 10, "times the thread left the CPU (blocking or preempted)" },
	{ "cpu-migrations", "migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, EVC_SOFTWARE,
	  EVS_KERNEL, 1, "moves of the thread to another CPU" },
};

#define RAW_DEFAULT_PERIOD 1000000u

const struct event_info *event_table(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

static int has_alias(const char *aliases, const char *name)
{
	size_t nl = strlen(name);
	for (const char *p = aliases; *p;) {
		size_t l = strcspn(p, " ");
		if (l == nl && !strncmp(p, name, l))
			return 1;
		p += l;
		while (*p == ' ')
			p++;
	}
	return 0;
}

int event_lookup(const char *name, struct event_spec *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(table[i].name, name) && !has_alias(table[i].aliases, name))
			continue;
		snprintf(out->name, sizeof(out->name), "%s", table[i].name);
		out->type = table[i].type;
		out->config = table[i].config;
		out->cls = table[i].cls;
		out->flags = table[i].flags;
		return 0;
	}
	/* Raw: r followed by the hexadecimal event code, as perf takes it. */
	if (name[0] == 'r' && name[1]) {
		size_t l = strlen(name + 1);
		int hex = l <= 16;
		for (size_t i = 1; hex && name[i]; i++)
			hex = isxdigit((unsigned char)name[i]) != 0;
		if (hex) {
			snprintf(out->name, sizeof(out->name), "r%s", name + 1);
			for (char *c = out->name + 1; *c; c++)
				*c = (char)tolower((unsigned char)*c);
			out->type = PERF_TYPE_RAW;
			out->config = strtoull(name + 1, NULL, 16);
			out->cls = EVC_RAW;
			return 0;
		}
	}
	if (strchr(name, ':'))
		snprintf(err, errlen, "event '%s': modifiers (:u, :k, ...) are not supported; give the plain name",
			 name);
	else
		snprintf(err, errlen, "unknown event '%s' ('strata record -e list' shows the events)", name);
	return -1;
}

int events_parse(const char *list, char sep, struct event_list *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!list || !*list) {
		snprintf(err, errlen, "empty event list");
		return -1;
	}
	const char *p = list;
	for (;;) {
		const char *end = strchr(p, sep);
		size_t l = end ? (size_t)(end - p) : strlen(p);
		if (l == 0) {
			snprintf(err, errlen, "malformed event list '%s': empty event name", list);
			return -1;
		}
		char name[64];
		if (l >= sizeof(name)) {
			snprintf(err, errlen, "malformed event list '%s': event name too long", list);
			return -1;
		}
		memcpy(name, p, l);
		name[l] = 0;
		if (out->n == EVENTS_MAX) {
			snprintf(err, errlen, "too many events in '%s': at most %d", list, EVENTS_MAX);
			return -1;
		}
		struct event_spec *e = &out->ev[out->n];
		if (event_lookup(name, e, err, errlen))
			return -1;
		for (uint32_t i = 0; i < out->n; i++)
			if (out->ev[i].type == e->type && out->ev[i].config == e->config) {
				snprintf(err, errlen, "event '%s' is listed twice", e->name);
				return -1;
			}
		out->n++;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

void events_format(const struct event_list *l, char sep, char *out, size_t n)
{
	size_t o = 0;
	if (n)
		out[0] = 0;
	for (uint32_t i = 0; i < l->n && o < n; i++) {
		int w = snprintf(out + o, n - o, "%s%s", i ? (char[]){ sep, 0 } : "", l->ev[i].name);
		if (w < 0)
			break;
		o += (size_t)w;
	}
}

uint64_t event_min_period(const struct event_spec *e)
{
	/* A sample of a thread switched out to block wakes it (the signal
	 * interrupts the wait) and so causes one more switch when it blocks
	 * again: with a period of 1 every switch would cause the next. */
	return e->flags & EVS_SELF_FEEDING ? 2 : 1;
}

uint64_t event_default_period(const struct event_spec *e, unsigned rate_hz)
{
	if (e->flags & EVS_CLOCK)
		return 1000000000ull / (rate_hz ? rate_hz : 1000);
	if (e->cls == EVC_RAW)
		return RAW_DEFAULT_PERIOD;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].type == e->type && table[i].config == e->config)
			return table[i].default_period;
	return RAW_DEFAULT_PERIOD;
}

void event_attr(const struct event_spec *e, void *attr, uint64_t period, int leader, int exclude_kernel)
{
	struct perf_event_attr *a = attr;
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = e->type;
	a->config = e->config;
	a->sample_period = period;
	a->exclude_hv = 1;
	a->exclude_kernel = exclude_kernel ? 1 : 0;
	if (leader) {
		/* Members are enabled but count only while their leader is
		 * scheduled: enabling and disabling the leader starts and
		 * stops the whole group. */
		a->disabled = 1;
		a->read_format = PERF_FORMAT_GROUP;
		a->wakeup_events = 1;
	}
}

int event_open(void *attr, pid_t tid, int group_fd)
{
	long fd = syscall(SYS_perf_event_open, attr, tid, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -1 : (int)fd;
}

int event_probe(const struct event_spec *e, int *exclude_kernel)
{
	struct perf_event_attr a;
	int first = 0;
	for (int ek = 0; ek <= 1; ek++) {
		if (ek && (e->flags & EVS_KERNEL))
			break;
		event_attr(e, &a, 0, 1, ek);
		int fd = event_open(&a, 0, -1);
		if (fd >= 0) {
			close(fd);
			*exclude_kernel = ek;
			return 0;
		}
		if (!first)
			first = errno;
		/* Only a permission problem can be cured by counting less. */
		if (errno != EACCES && errno != EPERM)
			break;
	}
	errno = first;
	return -1;
}

int perf_paranoid(void)
{
	int fd = open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return INT32_MIN;
	char buf[32];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return INT32_MIN;
	buf[n] = 0;
	return atoi(buf);
}

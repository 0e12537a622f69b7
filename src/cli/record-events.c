/*
 * record-events.c — `strata record -e`: checking the events on this machine
 * before the command starts, `-e list`, and the messages that say what to
 * do when an event cannot be recorded.
 *
 * Every event is opened once on the CLI itself (and then the whole group
 * together), with the same attributes the agent will use, so that an
 * event the machine lacks, or one this user may not count, fails here
 * with a one-line reason instead of leaving a profile without samples.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "common/events.h"

/* Whether the kernel exposes a CPU PMU (hardware counters) at all: a VM
 * without a virtual PMU has none, and every hardware event fails there. */
static int have_cpu_pmu(void)
{
	return access("/sys/bus/event_source/devices/cpu", F_OK) == 0 ||
	       access("/sys/bus/event_source/devices/cpu_core", F_OK) == 0 ||
	       access("/sys/bus/event_source/devices/cpu_atom", F_OK) == 0;
}

static int unsupported_errno(int e)
{
	return e == ENOENT || e == EOPNOTSUPP || e == ENODEV || e == EINVAL || e == ENOSYS;
}

/* The reason `e` cannot be opened (errno `err`), as one line. */
static void explain(const struct event_spec *e, int err, char *out, size_t n)
{
	int par = perf_paranoid();
	if (err == EACCES || err == EPERM) {
		if (par == INT32_MIN)
			snprintf(out, n, "not allowed to open perf event '%s' (%s), and kernel.perf_event_paranoid "
				 "cannot be read: run as root or with CAP_PERFMON", e->name, strerror(err));
		else if (e->flags & EVS_KERNEL)
			snprintf(out, n, "not allowed to count '%s': it happens inside the kernel, which needs "
				 "kernel.perf_event_paranoid at most 1 (it is %d); run 'sysctl -w "
				 "kernel.perf_event_paranoid=1' as root, or record as root or with CAP_PERFMON",
				 e->name, par);
		else
			snprintf(out, n, "not allowed to open perf event '%s': kernel.perf_event_paranoid is %d and must "
				 "be at most 2 for a user to count their own threads; run 'sysctl -w "
				 "kernel.perf_event_paranoid=2' as root, or record as root or with CAP_PERFMON",
				 e->name, par);
		return;
	}
	if (unsupported_errno(err)) {
		const char *alt = "try a software event such as -e cpu-clock or -e page-faults ('strata record -e list')";
		if (e->cls == EVC_SOFTWARE)
			snprintf(out, n, "event '%s' is not supported by this kernel (%s)", e->name, strerror(err));
		else if (!have_cpu_pmu())
			snprintf(out, n, "event '%s' is not supported on this machine: it exposes no hardware performance "
				 "counters (no CPU PMU, as in most virtual machines); %s", e->name, alt);
		else if (e->cls == EVC_RAW)
			snprintf(out, n, "raw event '%s' is not supported by this CPU's PMU (%s); %s", e->name,
				 strerror(err), alt);
		else
			snprintf(out, n, "event '%s' is not supported by this CPU's PMU (%s); %s", e->name, strerror(err),
				 alt);
		return;
	}
	snprintf(out, n, "cannot open perf event '%s': %s", e->name, strerror(err));
}

/* Opens the whole list as one group on this thread, like the agent does
 * per thread: events that open one by one may still not fit together. */
static int probe_group(const struct event_list *l, uint64_t period, int ek, int *failed)
{
	struct perf_event_attr a;
	int fds[EVENTS_MAX], n = 0, rc = 0;
	for (uint32_t i = 0; i < l->n; i++) {
		event_attr(&l->ev[i], &a, i == 0 ? period : 0, i == 0, ek);
		int fd = event_open(&a, 0, i == 0 ? -1 : fds[0]);
		if (fd < 0) {
			*failed = (int)i;
			rc = -1;
			break;
		}
		fds[n++] = fd;
	}
	int e = errno;
	while (n > 0)
		close(fds[--n]);
	errno = e;
	return rc;
}

int record_events_setup(const char *list, const char *period_arg, unsigned rate_hz, int rate_given, int mode,
			char *out_events, size_t out_len, uint64_t *period, int *clock)
{
	char err[512];
	struct event_list l;
	if (events_parse(list, ',', &l, err, sizeof(err))) {
		errorf("%s", err);
		return -1;
	}
	if (mode == MODE_WALL) {
		errorf("-e samples by event counts, which --mode wall does not: leave out --mode wall");
		return -1;
	}
	const struct event_spec *lead = &l.ev[0];
	if (period_arg) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(period_arg, &end, 10);
		if (!*period_arg || *end || errno || *period_arg == '-' || v == 0) {
			errorf("invalid period '%s': expected a positive number of %s per sample", period_arg,
			       lead->flags & EVS_CLOCK ? "nanoseconds" : "events");
			return -1;
		}
		if (v < event_min_period(lead)) {
			errorf("a period of %s is too small for '%s': each sample wakes a blocked thread and so "
			       "causes one more %s; use -c %llu or more", period_arg, lead->name, lead->name,
			       (unsigned long long)event_min_period(lead));
			return -1;
		}
		*period = v;
	} else {
		*period = event_default_period(lead, rate_hz);
	}
	if (rate_given && !(lead->flags & EVS_CLOCK))
		warnf("-F sets the rate of cpu-clock and task-clock only: '%s' is sampled every %llu events (-c)",
		      lead->name, (unsigned long long)*period);
	int any_user_only = 0;
	for (uint32_t i = 0; i < l.n; i++) {
		int ek;
		if (event_probe(&l.ev[i], &ek)) {
			explain(&l.ev[i], errno, err, sizeof(err));
			errorf("%s", err);
			return -1;
		}
		any_user_only |= ek;
	}
	int failed = 0;
	if (probe_group(&l, *period, any_user_only, &failed)) {
		if (errno == EACCES || errno == EPERM || l.n == 1) {
			explain(&l.ev[failed], errno, err, sizeof(err));
			errorf("%s", err);
		} else {
			errorf("events '%s' and '%s' cannot be counted together on this machine (%s): record fewer events",
			       lead->name, l.ev[failed].name, strerror(errno));
		}
		return -1;
	}
	events_format(&l, '+', out_events, out_len);
	*clock = (lead->flags & EVS_CLOCK) != 0;
	return 0;
}

void record_events_list(FILE *out)
{
	size_t n;
	const struct event_info *t = event_table(&n);
	fprintf(out, "Events for 'strata record -e EVENT[,EVENT...]'. The first event drives sampling (a sample\n"
		     "every PERIOD occurrences in a thread; -c PERIOD overrides the default); every event is\n"
		     "counted and attributed to the stacks sampled. 'here' says whether this machine and user\n"
		     "can record it.\n\n");
	fprintf(out, "  %-30s %-14s %-24s %s\n", "event", "default period", "here", "what it counts");
	for (size_t i = 0; i < n; i++) {
		struct event_spec e;
		char err[256], here[64], per[32];
		if (event_lookup(t[i].name, &e, err, sizeof(err)))
			continue;
		int ek;
		if (event_probe(&e, &ek) == 0)
			snprintf(here, sizeof(here), "%s", ek ? "yes (user space only)" : "yes");
		else if (errno == EACCES || errno == EPERM)
			snprintf(here, sizeof(here), "no (perf_event_paranoid)");
		else if (unsupported_errno(errno))
			snprintf(here, sizeof(here), "%s", e.cls == EVC_HARDWARE && !have_cpu_pmu() ? "no (no PMU)"
												: "no (unsupported)");
		else
			snprintf(here, sizeof(here), "no (%s)", strerror(errno));
		if (t[i].flags & EVS_CLOCK)
			snprintf(per, sizeof(per), "1/F s (-F)");
		else
			snprintf(per, sizeof(per), "%llu", (unsigned long long)t[i].default_period);
		char name[64];
		snprintf(name, sizeof(name), "%s%s%s%s", t[i].name, t[i].aliases[0] ? " (" : "", t[i].aliases,
			 t[i].aliases[0] ? ")" : "");
		fprintf(out, "  %-30s %-14s %-24s %s\n", name, per, here, t[i].help);
	}
	fprintf(out, "  %-30s %-14s %-24s %s\n", "rNNNN", "1000000", have_cpu_pmu() ? "depends on the CPU" : "no (no PMU)",
		"raw PMU event, NNNN in hex as in the CPU's manual");
	fprintf(out, "\nHardware events need a CPU PMU (most VMs have none); context-switches and\n"
		     "cpu-migrations need kernel.perf_event_paranoid <= 1 or CAP_PERFMON. See docs/events.md.\n");
}

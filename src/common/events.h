/*
 * events.h — the perf events `strata record -e` accepts: their names as
 * perf spells them, how each maps to perf_event_open, their default
 * sampling periods, and opening one.
 *
 * Shared by the CLI (which parses the list and checks every event on this
 * machine before the command starts, so that a mistake fails early and
 * clearly) and the agent (which parses the same list from STRATA_OPTIONS
 * and opens one event group per thread). Nothing here runs in a signal
 * handler.
 */
#ifndef STRATA_EVENTS_H
#define STRATA_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "format.h"

/* At most this many events per recording: one value each in REC_SAMPLE. */
#define EVENTS_MAX STRATA_MAX_COUNTERS

enum event_class { EVC_HARDWARE = 0, EVC_SOFTWARE = 1, EVC_RAW = 2 };

enum event_spec_flags {
	EVS_CLOCK = 1 << 0,  /* counts nanoseconds: its period comes from -F */
	EVS_KERNEL = 1 << 1, /* happens inside the kernel (the scheduler): a
	                      * user-space-only counter would read 0, so it
	                      * needs kernel counting (perf_event_paranoid <= 1) */
	EVS_SELF_FEEDING = 1 << 2, /* each sample causes one more occurrence
	                      * (context-switches: the signal wakes a blocked thread) */
};

struct event_spec {
	char name[24];       /* canonical name ("cycles", "r01c2") */
	uint32_t type;       /* perf_event_attr.type (PERF_TYPE_*) */
	uint64_t config;
	uint32_t cls;        /* enum event_class */
	uint32_t flags;      /* EVS_* */
};

struct event_list {
	uint32_t n;
	struct event_spec ev[EVENTS_MAX];
};

/* The named events, in the order `strata record -e list` shows them. */
struct event_info {
	const char *name;
	const char *aliases; /* space-separated perf aliases, or "" */
	uint32_t type;
	uint64_t config;
	uint32_t cls, flags;
	uint64_t default_period; /* occurrences per sample; 0 for clocks (from -F) */
	const char *help;
};
const struct event_info *event_table(size_t *n);

/* Looks up one event name (or alias, or raw rNNNN). 0, or -1 with a
 * one-line reason in err. */
int event_lookup(const char *name, struct event_spec *out, char *err, size_t errlen);

/* Parses "a,b,c" (sep ',') or "a+b+c" (sep '+', the agent's form).
 * Rejects empty items, unknown names, duplicates and more than EVENTS_MAX
 * events. 0, or -1 with a one-line reason in err. */
int events_parse(const char *list, char sep, struct event_list *out, char *err, size_t errlen);

/* Writes the list as "a<sep>b<sep>c" into out (size n). */
void events_format(const struct event_list *l, char sep, char *out, size_t n);

/* The sampling period used for `e` when -c is not given: for a clock, one
 * period of `rate_hz` in nanoseconds. */
uint64_t event_default_period(const struct event_spec *e, unsigned rate_hz);

/* The smallest period that does not feed on itself (see EVS_SELF_FEEDING). */
uint64_t event_min_period(const struct event_spec *e);

/* A perf_event_attr for `e`: sampling every `period` (0: counting only),
 * the group leader reading the whole group at once, disabled until
 * PERF_EVENT_IOC_REFRESH / ENABLE when `leader`. `attr` must point at a
 * struct perf_event_attr (kept opaque here so that users of this header
 * need not include linux/perf_event.h). */
void event_attr(const struct event_spec *e, void *attr, uint64_t period, int leader, int exclude_kernel);

/* perf_event_open(attr, tid, cpu -1, group_fd, CLOEXEC). Returns the fd,
 * or -1 with errno set. */
int event_open(void *attr, pid_t tid, int group_fd);

/* Opens `e` on the calling thread and closes it again, to learn whether
 * this machine and user can count it: first with kernel counting, then
 * (unless the event only happens in the kernel) user space only. Returns
 * 0 with *exclude_kernel set, or -1 with errno of the first failure
 * (ENOENT/EOPNOTSUPP: no such counter here; EACCES/EPERM: not allowed). */
int event_probe(const struct event_spec *e, int *exclude_kernel);

/* /proc/sys/kernel/perf_event_paranoid, or INT32_MIN if unreadable. */
int perf_paranoid(void);

#endif

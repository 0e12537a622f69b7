/*
 * top.h — `strata top`, the live view (docs/top.md). Split by concern:
 *
 *   builtin-top.c  options, the refresh loop, keys, signals, quitting
 *   top-target.c   the program watched: started under `strata record`, or
 *                  attached to by pid; sampling on/off, leaving it running
 *   top-data.c     what a screen shows, computed from the profile model
 *                  (no terminal code: the curses and plain views share it)
 *   top-objects.c  the same for the objects view (--objects): allocations
 *                  per second by type and by line
 *   top-view.c     drawing it: ncurses, or plain periodic text
 */
#ifndef STRATA_TOP_H
#define STRATA_TOP_H

#include <stdint.h>
#include <sys/types.h>

#include "cli/attach/attach.h"
#include "lib/profile.h"

/* ---- top-target.c ------------------------------------------------------- */

struct top_target {
	int started;            /* we ran the command (under strata record) */
	pid_t record_pid;       /* that strata record, in its own process group
	                         * when the view owns the terminal */
	int own_group;
	int ended;              /* the program is gone */
	int status;             /* started: strata record's wait status */
	struct attach att;      /* --pid */
	char file[4096];        /* the profile being tailed */
	int temp_file;          /* ours to remove at the end */
	char log[4096];         /* started with curses: where the program's output goes */
};

struct top_launch {
	char **argv;            /* command, or NULL with pid */
	pid_t pid;
	const char *output;     /* -o: keep the profile here */
	char **record_opts;     /* options passed on to strata record */
	int nrecord_opts;
	unsigned rate_hz;       /* --pid: 0 keeps the agent's */
	const struct attach_want *want; /* --pid: the settings asked for, or NULL */
	int redirect;           /* send the program's output to a log file */
};

int target_open(struct top_target *t, const struct top_launch *l, char *err, size_t errlen);
/* Polls for the program's end; returns 1 while it runs. */
int target_alive(struct top_target *t);
/* Python processes of the target that have a control channel. */
int target_pids(struct top_target *t, pid_t *out, int max);
/* Sampling on/off in every process of the target. Returns 0, or -1 with
 * err filled (when no process could be reached). */
int target_set_sampling(struct top_target *t, int on, char *err, size_t errlen);
/* Whether sampling is on in the target's first process: 1, 0, -1 unknown. */
int target_sampling(struct top_target *t);
/* Leaves the program running: detaches every agent (or, attached, ends
 * the attach). */
int target_leave(struct top_target *t, char *err, size_t errlen);
/* Stops a program we started: signal to its group, then waits (bounded),
 * escalating to SIGTERM and SIGKILL. */
void target_stop(struct top_target *t, int sig);
/* Waits up to ms for a started program to end by itself. */
void target_wait(struct top_target *t, int ms);
/* Removes what is ours (temporary profile, empty log). */
void target_close(struct top_target *t);

/* ---- top-data.c --------------------------------------------------------- */

enum top_sort { SORT_SELF = 0, SORT_TOTAL = 1 };

struct top_settings {
	int lines;              /* line view (else functions) */
	int sort;               /* SORT_SELF / SORT_TOTAL (objects view: objects / bytes) */
	int window_all;         /* sort by since-start (else the last interval) */
	uint32_t event;         /* event column shown and sorted by */
	uint32_t pid, tid;      /* filters, 0 = all */
	int objects;            /* the objects view (allocations by type and line) */
	char type[256];         /* --type / the 'y' key: only allocations of this type ("" = all) */
	char task[256];         /* --task / the 'k' key: only samples of this asyncio task ("" = all) */
};

struct top_row {
	uint32_t func, line;
	double last_self, last_total;   /* percent of the interval's event total */
	double all_self, all_total;     /* percent since start */
};

/* The objects view: a type, or a function or line, with what it
 * allocated over the last interval (per second) and since the start
 * (estimates from the samples, docs/objects.md). */
struct top_obj_row {
	uint32_t type;                  /* type rows: index into types */
	uint32_t func, line;            /* function and line rows */
	double last_objects, last_bytes;
	uint64_t all_objects, all_bytes;
	uint64_t live_bytes;            /* allocated since the start and not freed so far */
};

struct top_frame {
	/* header */
	uint64_t samples_all, samples_last;  /* event 0 (sample weights) */
	double rate;                          /* samples per second over the interval */
	double interval_s, elapsed_s;
	uint64_t dropped, dropped_last;
	uint32_t procs, threads;
	uint32_t event;                       /* the event the rows are of */
	/* rows, sorted */
	struct top_row *rows;
	uint32_t nrows;
	/* the objects view (top_objects_build) */
	int has_objects;                      /* the profile holds allocation samples */
	int type_missing;                     /* settings.type names no type recorded (yet) */
	struct top_obj_row total;             /* every allocation the filters keep */
	struct top_obj_row *types, *orows;    /* by type; by line (or function) */
	uint32_t ntypes, norows;
};

/* Builds a frame: rows over samples [mark, nsamples) (the last interval)
 * and over all samples (and the objects view's, in the objects view).
 * Returns 0 or -1 (out of memory). */
int top_frame_build(const struct profile *p, const struct top_settings *s, uint64_t mark, uint64_t dropped_mark,
		    double interval_s, double elapsed_s, struct top_frame *f);
/* The filter of the settings, for the profile as read so far: pid, tid,
 * the type (a type named but not recorded yet keeps nothing: *missing is
 * then 1) and the task (one not recorded yet keeps nothing either). */
struct agg_filter top_filter(const struct profile *p, const struct top_settings *s, int *missing);

/* One view's rows (lines, or functions) since the start and over the last
 * interval, the interval's sorted by key: the time view and the objects
 * view both join the two row by row. */
struct top_window {
	struct agg *all, *last;
	const struct agg_row *rows; /* all's */
	uint32_t nrows;
	struct agg_row *lrows;      /* last's, sorted */
	uint32_t nlrows;
};
int top_window_build(const struct profile *p, const struct agg_filter *fa, const struct agg_filter *fl, uint32_t ev,
		     int lines, struct top_window *w); /* 0, or -1 (out of memory) */
/* The interval's row for the same function and line as a, or NULL. */
const struct agg_row *top_window_last(const struct top_window *w, const struct agg_row *a);
void top_window_free(struct top_window *w);
void top_frame_free(struct top_frame *f);
/* The row's name and location ("heavy", "split.py:10"). */
void top_row_text(const struct profile *p, const struct top_settings *s, const struct top_row *r, char *name,
		  size_t nn, char *loc, size_t ln);
/* Label of the thread / process filter ("all", "busy-1 (1234)"). */
void top_filter_text(const struct profile *p, const struct top_settings *s, char *thr, size_t tn, char *proc,
		     size_t pn);
/* Next thread / process for the filter keys, cycling through "all". */
void top_next_thread(const struct profile *p, struct top_settings *s);
void top_next_process(const struct profile *p, struct top_settings *s);

/* ---- top-objects.c ------------------------------------------------------ */

/* The objects view's part of a frame: types and lines (or functions, by
 * s->lines), sorted by s->sort (objects / bytes) over s->window_all.
 * Returns 0 or -1 (out of memory). */
int top_objects_build(const struct profile *p, const struct top_settings *s, uint64_t mark, struct top_frame *f);
void top_objects_free(struct top_frame *f);
/* Next asyncio task for the task filter ('k'), busiest first, then all. */
void top_next_task(const struct profile *p, struct top_settings *s);
/* Next type for the type filter ('y'), by bytes since the start, then all. */
void top_next_type(const struct profile *p, struct top_settings *s);

/* ---- top-view.c --------------------------------------------------------- */

struct top_status {
	const char *command;
	pid_t pid;
	int sampling;           /* 1 on, 0 off, -1 unknown */
	int frozen;
	const char *message;    /* one line at the bottom, or NULL */
	const char *prompt;     /* a question waiting for a key, or NULL */
};

int view_curses_open(void);   /* 0, or -1 if the terminal cannot do it */
void view_curses_close(void); /* restores the terminal; safe to call twice */
void view_curses_draw(const struct profile *p, const struct top_settings *s, const struct top_frame *f,
		      const struct top_status *st);
/* A key, or -1 after timeout_ms. */
int view_curses_key(int timeout_ms);
void view_curses_help(void);
/* One plain-text block: header and up to `rows` rows. */
void view_plain_print(const struct profile *p, const struct top_settings *s, const struct top_frame *f,
		      const struct top_status *st, int rows, int all_only);
/* The objects view's tables, from line y of the screen (curses). */
void view_objects_draw(const struct profile *p, const struct top_settings *s, const struct top_frame *f, int y);
/* Its plain text. */
void view_objects_print(const struct profile *p, const struct top_settings *s, const struct top_frame *f, int rows,
			int all_only);

#endif

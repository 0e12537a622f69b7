/*
 * writer.h — what the writer's files share: its state (W), the types of
 * its code and stack tables, and the calls between writer.c (the pass
 * loop), writer-stacks.c (stacks and code objects) and writer-output.c
 * (the output: its chunks, session and control). In strata-agentd;
 * nothing else includes it (agentd.h has the writer's API).
 */
#ifndef STRATA_WRITER_H
#define STRATA_WRITER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/agent.h"
#include "common/format.h"
#include "target.h"

/* ---- intern tables ---------------------------------------------------- */

/* Open-addressing map from a 64-bit key hash to an index, with the keys
 * kept in an arena for exact comparison. */
struct itab {
	uint64_t *hash;
	uint32_t *id, *off, *len;
	uint32_t cap, count;
	struct wbuf arena;
};

/* ---- code table ----------------------------------------------------------- */

/* Code objects by (address, low bits of co_firstlineno). An entry whose
 * object has died (dies_at set) still answers for samples taken before the
 * death and is dropped at the end of the drain pass, so a new code object
 * at the same address becomes a new entry. Linear probing with
 * backward-shift deletion, so there are no tombstones. */
struct centry {
	uint64_t addr, dies_at;
	uint32_t index;
	uint16_t first;
	uint8_t used;
};

struct ctab {
	struct centry *e;
	uint32_t cap, count;
};

/* Code objects that died (grave.h), taken at the start of a pass. */
struct death {
	struct death *next;
	uint64_t addr, t;
	struct strata_codeinfo info;
};

/* ---- writer state ------------------------------------------------------- */

struct writer {
	pthread_mutex_t lock;     /* one drainer at a time: writer thread or exit path */
	int fd;
	dev_t dev;
	ino_t ino;
	int failed;               /* output unusable: stop writing */
	struct wbuf recs;         /* records of the next chunk */
	struct wbuf chunk;
	uint32_t seq;
	int any_samples;          /* this stream has samples: it is worth writing */
	int limit_noted;          /* the region's failed growth is in the stream */
	uint64_t last_time;
	uint64_t last_flush;
	uint64_t samples, dropped;
	uint64_t drained;         /* ring records taken, written or not (the writer's pace) */
	struct ctab codes;
	struct itab stacks;
	struct death *dying;      /* deaths taken for the current pass */
	uint32_t next_code, next_stack;
	struct wbuf key;          /* scratch for stack keys */
	struct rec_pyframe *pyf;  /* scratch for REC_STACK frames */
	uint32_t pyf_cap;
	/* the writer thread's pace for this target (writer.c) */
	int serving;              /* in the thread's list: passes are made */
	int finished;             /* the stream is ended: no pass any more */
	_Atomic int poked;        /* a pass is wanted now */
	int idle;                 /* sampling off: no pass until poked */
	long nap_ms;              /* between passes */
	uint64_t due;             /* the next pass (mono_ns) */
	int attached;             /* output handed over by `attach`: its stream is written
	                           * even without samples, so every attach leaves a file */
	int own_session;          /* we wrote the output's session: we end it too */
	uint64_t session_stream;
	uint64_t last_scan;       /* by-tid mode: last threads_scan() */
	uint64_t last_evcheck;    /* -e: last look at the threads' unmapped groups */
};
/* The current target's writer (target.h); its slot is writer.c's. */
extern int writer_slot;
#define W (*(struct writer *)agentd_target->mod[writer_slot])

/* writer.c */
/* There is an output (else standby: records are dropped). */
int writer_has_output(void);
/* argv from /proc/PID/cmdline (NUL-separated) into cmd; returns argc. */
uint32_t read_cmdline(char *cmd, size_t cmdlen, char **argv, uint32_t max);
/* The stream's REC_PROCESS (and its events). */
void put_process(uint32_t flags);
/* Drains every ring and retires exited threads. Caller holds W.lock. */
void drain_all(void);
/* Writes the stream's last records. Caller holds W.lock, rings drained. */
void finish_stream(int reason);
/* A new stream: tables, counts and sequence start over. */
void state_reset(void);

/* writer-stacks.c */
/* The REC_STACK index of a drained sample's stack, writing its REC_STACK
 * (and REC_CODE records before it) the first time; UINT32_MAX if memory
 * is short. */
/* npy frames at py (the sample's, or its logical stack: tasks.h), with
 * task boundaries (none: ts NULL). */
struct tstack;
uint32_t stack_index(const struct rsample *h, const struct strata_pyframe *py, uint32_t npy, const uint64_t *native,
		     const struct tstack *ts);
struct centry *ctab_find(struct ctab *t, uint64_t addr, uint16_t first);
/* Forgets the code objects that died (their samples are written). */
void ctab_drop_dead(struct ctab *t);
void ctab_free(struct ctab *t);
void itab_free(struct itab *t);
struct death *deaths_take(void);
void deaths_free(struct death *d);

/* writer-output.c */
/* Opens agent.cfg.output for appending, as W.fd. Returns 0 or -1. */
int open_output(void);
/* Appends the pending records to the output, one compressed chunk. */
void flush_chunk(uint16_t flags);
/* Ends the session of an output the agent created (attach). */
void write_session_end(void);
/* The REC_SESSION a file the agent makes begins with (an attach's
 * output, a window for the sender), as of realtime/mono now. */
void put_session(struct wbuf *recs, uint64_t realtime_ns, uint64_t mono);
/* Whether the writer has a file to write (else only windows, or none). */
int writer_has_file(void);
/* Continuous profiling: the window is over (W.lock held, rings drained):
 * the stream ends in every sink and the next one begins. */
void writer_window_cut(void);

#endif

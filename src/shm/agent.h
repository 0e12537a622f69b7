/*
 * agent.h — the agent's shared state and the map of its modules.
 *
 * The agent is two programs. libstrata-agent.so is loaded into the
 * profiled process (LD_PRELOAD, or dlopen by the Python module) and keeps
 * no thread of its own there: a program that counts its threads (CPython
 * before fork), or ends when its last thread exits, sees exactly its own.
 * It samples in the signal handler into per-thread rings, registers
 * threads, follows fork/exec/exit, and hooks code-object deaths.
 * strata-agentd, one per profiled process, does everything else in a
 * process of its own: drains the rings and writes the profile, serves the
 * control socket, runs the wall-mode sampler, builds unwind tables, finds
 * JIT code. Between them: a shared memory region (shm.h) holding
 * struct agent_state, the slots and rings; a socket pair (link.h); and the
 * helper reads the target's memory through a /proc/PID/mem descriptor the
 * target opened (remote.h).
 *
 * The folders say which program a file runs in (docs/hacking.md):
 *   src/agent/   libstrata-agent.so, in the profiled process: lifecycle
 *                (agent.c), its options (options.c), the module for this
 *                interpreter (pymodule.c), the helper's start (link.c),
 *                signal handlers, the sample capture, threads, fork/exec,
 *                sleeps, --native unwinding, JIT leaves, --objects hooks
 *                and GOT slots
 *   src/agentd/  strata-agentd: writer, control, wall sampler, /proc scan,
 *                unwind tables, JIT polling, perf maps, reading the target
 *   src/shm/     both: this header and the region's layout (shm.h), rings,
 *                slots, triggers, the contract headers between the two
 *
 * Everything reached from the signal handler is in the shared region or
 * the target's own memory, set up before the handler can run, and read
 * only through atomics or immutable snapshots afterwards.
 */
#ifndef STRATA_AGENT_H
#define STRATA_AGENT_H

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "py/pyapi.h"
#include "ring.h"
#include "common/events.h"

#define AGENT_EXPORT __attribute__((visibility("default")))
#define TLS_IE __attribute__((tls_model("initial-exec")))

struct agent_config {
	int mode;            /* MODE_CPU / MODE_WALL */
	unsigned rate_hz;
	uint64_t period_ns;
	unsigned max_depth;  /* Python frames per sample */
	uint32_t ring_size;  /* bytes per thread ring */
	int flush_ms;        /* how often the writer appends a chunk */
	int paused;          /* start with sampling off */
	int native;          /* --native: unwind native stacks too */
	int perf_map;        /* --perf-map: JIT code into /tmp/perf-PID.map and a jitdump (jitdump.c) */
	unsigned native_depth; /* native frames per sample */
	unsigned native_compile; /* with native_compile_fixed: frames read in place before an
	                          * object's unwind table is built (0: at load) */
	int native_compile_fixed; /* else: a quarter as many frames as the object has FDEs */
	/* -e: the first event drives sampling every event_period occurrences;
	 * all of them are counted and read at each sample. */
	struct event_list events;
	uint64_t event_period;
	int event_exclude_kernel;    /* user-space counting only (perf_event_paranoid) */
	int perf_exclude_kernel;     /* the task-clock trigger counts user space only */
	int objects;                 /* --objects: sample allocations (objects.c) */
	uint64_t objects_rate;       /* mean bytes between allocation samples */
	char output[4096];
	/* Continuous profiling (docs/send.md): every send_every_ms the
	 * helper ends the stream's window and leaves it in the spool
	 * directory send_dir for the sender (`strata send --spool`); it
	 * keeps at most send_queue windows there. Empty: not sending. Set
	 * by `strata record --send` (STRATA_OPTIONS), by the helper itself
	 * (STRATA_SEND, `strata ctl PID send`); a fork child inherits it and
	 * sends through its parent's sender. */
	char send_dir[512];
	unsigned send_every_ms;
	unsigned send_queue;
};

/* One registered thread, in the shared region. Made by the thread itself
 * (the pthread_create trampoline, or the agent's start for the main
 * thread), or by the helper's scan for a thread that predates a dlopen'ed
 * agent (`external`); retired by the helper's writer once the thread
 * exited and its ring is drained. */
struct tslot {
	struct tslot *next;          /* registry list, under agent.reg_lock */
	pid_t tid;
	pthread_t pthread;
	uint64_t start_ns, end_ns;
	struct ring ring;

	/* Trigger, as the profiled process numbers its descriptors (the
	 * handler reads counters and re-arms through them). */
	int trigger_fd;              /* perf event fd (-e: the group leader), or -1 */
	int counter_fd[EVENTS_MAX];  /* -e: the group's other events (index 0 unused), or -1 */
	uint64_t counter_prev[EVENTS_MAX]; /* group values at this thread's last sample */
	uint32_t ncounters;          /* events in this thread's group; 0 = none */
	timer_t timer;
	int has_timer;
	/* The descriptor number the overflow signal names (si_fd): the
	 * opener's. The helper opens the task-clock event of every thread
	 * (helper_trigger) and holds it (helper_fd) until the writer retires
	 * the slot or the stream ends; events are removed on exec. For a
	 * slot the helper registered (scan.c) with -e counters, the handler
	 * takes a copy of the leader at its first sample (trigger_fd) and
	 * the helper then lets go of its own. */
	int sig_fd;
	/* -e, a thread's own group: the leader's ring (its user page and one
	 * data page, where the kernel writes the group's counts at each
	 * overflow: PERF_SAMPLE_READ) and the others' user pages, mapped in
	 * the profiled process. A mapping holds its event as a descriptor
	 * does, so a program that closes or dup2s over our descriptors
	 * (a daemon) leaves the group counting and signalling, and the
	 * handler reads the counts from the ring, never from a descriptor
	 * number the program may have reused. NULL where the mapping was
	 * refused (locked-memory limits): then the descriptors carry it. */
	void *ev_map;
	void *ev_sib_map[EVENTS_MAX];
	uint64_t ev_id[EVENTS_MAX];  /* each one's PERF_EVENT_IOC_ID: tells our descriptor from a reused number */
	/* -e without mappings: the program closed or replaced our descriptor.
	 * 1: the descriptors carried the group (no mapping) and one is gone,
	 * to be said; 2: said, or nothing to say (an exec ends the stream);
	 * 3: the mapping carried it past the close and went before an exec
	 * that then failed, to be said so. */
	_Atomic int ev_lost;
	int helper_fd;
	int helper_counter_fd[EVENTS_MAX];
	_Atomic int fd_taken;        /* the handler has its copy of helper_fd */
	/* The helper opens this thread's perf event (cpu mode): asked for
	 * by the thread when it registers, done by the helper's link
	 * thread; the thread itself then holds no descriptor. */
	_Atomic int helper_trigger;
	int trigger_failed;          /* helper: the open failed (its errno), not retried */
	int stat_fd;                 /* helper: /proc/PID/task/TID/stat (wall mode) */
	_Atomic int wall_pending;    /* wall ticks that signalled us since our last sample */

	/* handler state */
	volatile sig_atomic_t in_handler;
	/* In our SIGPROF handler (every signal of the program blocked), and
	 * the mask of the code it interrupted: what the thread blocks as far
	 * as a signal sent to the process is concerned (handoff.c). */
	volatile sig_atomic_t in_prof;
	volatile uint64_t prof_mask;
	/* Counted by this thread's handlers: the program's handlers run
	 * (on_program, chained), and samples of ours. A pause() or
	 * sigsuspend() that only a sample cut short is made again
	 * (sleeps.c). */
	volatile uint32_t sig_app, sig_ours;
	sigjmp_buf guard_jb;
	volatile sig_atomic_t guard_on;
	void *tstate;                /* last PyThreadState seen (wall sampler reads it) */
	/* The unwind-table snapshot the handler is using (unwind.c); the
	 * builder frees no snapshot a slot holds. */
	_Atomic(void *) unwind_hazard;
	volatile int native_progress; /* frames stored so far, for a faulting unwind */

	_Atomic uint64_t samples;    /* samples pushed */
	_Atomic uint64_t dropped;    /* samples lost: ring full or faults */
	_Atomic int exited;

	/* Registered from outside by tid (scan.c): no TLS destructor tells us
	 * it ended, the scan does. `proc_start` (starttime in
	 * /proc/PID/task/TID/stat) tells a reused tid from the thread. */
	int external;
	unsigned long long proc_start;
	uint32_t scan_gen;

	/* wall mode (helper memory): the stack of a blocked thread, read once
	 * per episode of blocking (wall.c). */
	void *wall_cache;

	/* writer-only state */
	int announced;
	char name[64];
	/* Set (under reg_lock) when a name arrives after the thread was
	 * announced: the writer then writes REC_THREAD_NAME. */
	_Atomic int name_dirty;
	uint64_t reported_dropped;
};

/* By-tid lookup for threads the pthread_create wrapper never saw. */
#define TIDTAB_SIZE 8192
struct tident {
	_Atomic pid_t tid;
	_Atomic(struct tslot *) slot;
};

/* The JIT code ranges the handler consults (jit.c), published by the
 * helper's poller (jit-poll.c) under a sequence count. */
#define JIT_MAX_RANGES 4096
struct jit_ranges {
	_Atomic uint32_t seq;
	_Atomic uint32_t n;
	_Atomic uint64_t lo[JIT_MAX_RANGES], hi[JIT_MAX_RANGES];
	/* The interpreter's own code: a pc there is never JIT's callee. */
	_Atomic uint32_t ninterp;
	uint64_t interp_lo[4], interp_hi[4];
};

/* Code objects the deallocation hook saw die (their contents, at death),
 * for the writer: a byte ring of records, one producer at a time. */
#define GRAVE_SIZE (1u << 20)
struct graveyard {
	_Atomic int lock;            /* producers (threads of the profiled process) */
	_Atomic uint64_t head, tail;
	_Atomic uint64_t lost;
	uint8_t buf[GRAVE_SIZE];
};

/* Code objects the handler has seen, as a lossy bitmap: one byte store per
 * frame in the handler, one load in the deallocation hook. A false
 * positive only costs keeping a dead code object's name a little longer. */
#define CODE_SEEN_SIZE (1u << 20)
static inline uint32_t code_seen_slot(uint64_t addr)
{
	return (uint32_t)((addr >> 4) * 0x9E3779B97F4A7C15ull >> 44) & (CODE_SEEN_SIZE - 1);
}

/* Children started while the output changed at run time (attach, detach)
 * take the current one: "STRATA_OUTPUT=path", or "STRATA_AGENT=1". */
struct outvar {
	_Atomic int which;           /* 0: none yet, else 1 + the buffer in use */
	char buf[2][4200];
};

/* What the agent could not do, for the writer to put in the stream as
 * NOTE records (format.h): posted by either process (never from a signal
 * handler), written once. A fixed table: what does not fit is left out,
 * since each kind of trouble is posted once. */
#define NOTES_MAX 16
struct agent_note {
	_Atomic int state;           /* 0 free, 1 being filled, 2 ready, 3 written */
	uint32_t kind, tid;          /* enum note_kind; tid 0: the process */
	uint64_t time_ns;
	char text[240];
};
struct agent_notes {
	_Atomic uint32_t next;
	struct agent_note e[NOTES_MAX];
};

struct agent_state {
	/* Set up by the profiled process before the helper starts; read-only
	 * afterwards unless said otherwise. */
	int active;                  /* configured, Python found, module loaded */
	pid_t pid;                   /* the profiled process */
	_Atomic pid_t helper_pid;
	uint64_t stream;             /* current stream id (changes on attach: helper) */
	uint32_t stream_flags;       /* PROC_* flags of the current stream */
	uint64_t start_ns;
	int trigger;                 /* enum trigger_kind actually used */
	struct agent_config cfg;     /* rate, paused and output change at run time (helper) */
	char python_version[64];
	char module_version[64];     /* the one the module was built for (another patch release?) */
	struct strata_pysyms pysyms; /* where the interpreter is, for the helper's reader */
	uint64_t r_debug;            /* &_r_debug: the loaded objects, for the helper */
	uint64_t vdso;               /* AT_SYSINFO_EHDR */
	char agent_dir[4096];        /* where libstrata-agent.so and the modules are */
	int standby;                 /* no output at start: wait for `attach` */
	/* Loaded with dlopen: threads that predate the agent are found by
	 * scanning /proc/PID/task and their slots looked up by tid (the
	 * leader's always is: slot_in_tidtab). */
	int by_tid;

	pthread_mutex_t reg_lock;    /* process-shared, robust: the slot list */
	struct tslot *slots;
	struct tident tidtab[TIDTAB_SIZE];

	_Atomic int sampling;        /* handler records samples only when set */
	_Atomic int stopping;        /* the process is exiting or exec'ing */
	/* The wall-mode sampler's ring for samples of idle threads (helper). */
	struct tslot *sampler_slot;
	/* Samples and drops of threads already retired (status totals). */
	_Atomic uint64_t retired_samples, retired_dropped;
	/* Program signals sent to the process that a sampled thread found
	 * pending as its handler ended, and left to the leader (handoff.c):
	 * waits, their total and longest time, and those that ran out of
	 * time (the thread then took the signal). Status totals. */
	_Atomic uint64_t handoff_waits, handoff_ns, handoff_max_ns, handoff_timeouts;
	/* ... and those another thread took all the same (the kernel passes
	 * a pending one on as our handler starts), passed on to the leader. */
	_Atomic uint64_t handoff_reroutes;

	/* Whether the module may read this interpreter (enum layout_state):
	 * LAYOUT_PENDING while a module built for another patch release of
	 * a pre-3.13 CPython waits for its check on a live frame (pymodule.c);
	 * the helper writes nothing meanwhile. Set by the profiled process,
	 * or by the helper if the process ends undecided. */
	_Atomic int layout;
	char layout_why[1024];        /* LAYOUT_BAD: the one line said */

	/* The writer's state the deallocation hook consults. */
	_Atomic int has_output;      /* there is an output (else standby) */
	_Atomic int writer_idle;     /* sampling off and the rings drained since */

	/* Handler-read tables the helper maintains. */
	_Atomic(void *) unwind_cur;  /* struct usnap (unwind-build.c) */
	_Atomic int unwind_miss;     /* the handler met code outside every table */
	struct jit_ranges jit;
	uint8_t *code_seen;          /* CODE_SEEN_SIZE bytes */
	struct graveyard *grave;
	struct outvar outvar;
	struct objtab *objtab;       /* --objects: sampled blocks (objects.h) */
	struct agent_notes notes;
	_Atomic int small_rings;     /* a ring was made smaller than asked: noted */

	/* The link between the profiled process and its helper (link.h):
	 * futex words in this shared region, so the process holds no
	 * descriptor for it. The process sets request bits, then takes a
	 * ticket (link_seq + 1) and wakes the helper, which waits on
	 * link_seq; the helper serves every pending bit, then publishes the
	 * last ticket it saw in link_done and wakes the waiters there. */
	_Atomic uint32_t link_seq;
	_Atomic uint32_t link_req;   /* LINK_REQ_* bits */
	_Atomic uint32_t link_done;
	_Atomic uint32_t link_reason; /* LINK_REQ_FINISH: enum process_end_reason */
	_Atomic uint64_t link_grow;  /* LINK_REQ_GROW: the region's wanted size */
	/* The last ticket whose GROW was served: answered apart, so a grow
	 * is not held up by the rest (the helper may have to wait for the
	 * thread list to open a thread's event). */
	_Atomic uint32_t link_grown;
	/* asyncio (docs/async.md): where the target's tasks are, found by
	 * the helper once asyncio is imported (agentd/tasks.c) and read by
	 * the handler (the running task) once async_ready is set; fixed
	 * from then on. */
	struct strata_asyncref async_ref;
	_Atomic int async_ready;

	/* The pid of a helper that left (or never got going): nothing
	 * waits for it. A pid, not a flag: the helper of a stream that
	 * ended in a failed exec may leave after the next one started. */
	_Atomic pid_t link_gone;
	/* Why the helper could not start (one line), for the profiled
	 * process to report as its own: the helper may lack the descriptor
	 * to say so on the program's standard error (why_logged: it did). */
	char helper_why[300];
	_Atomic int helper_why_logged;
};

enum layout_state { LAYOUT_OK = 0, LAYOUT_PENDING = 1, LAYOUT_BAD = 2 };

/* The state, in the shared region once the agent is set up; before that
 * (and in a process the agent does nothing in) a zeroed stand-in, so the
 * interposers can always ask agent.active. */
#ifdef STRATA_AGENTD
/* In the helper (built with STRATA_AGENTD): the state of the process the
 * calling thread works for (agentd/target.h, target_enter). */
extern __thread struct agent_state *agentp;
#else
extern struct agent_state *agentp;
#endif
#define agent (*agentp)

extern TLS_IE __thread struct tslot *tls_slot;

/* Ring record written by the handler (all fields little-endian native). */
struct rsample {
	uint64_t time_ns;
	uint32_t tid;
	uint32_t weight;
	uint32_t py_missing;
	uint16_t npy;
	uint16_t nnative;
	uint8_t ncounters;
	uint8_t sample_flags;
	uint16_t stack_flags;
	uint16_t task_at;       /* 1 + the index in py of the task's coroutine frame, 0 if not known */
	uint8_t task_name_len;  /* bytes of the task's name after the native frames */
	uint8_t wait;           /* wall mode, a blocked thread: why (enum wait_reason, format.h) */
	uint64_t task;       /* the asyncio task the thread was running (its address), 0 if none */
	/* followed by: uint64_t counters[ncounters];
	 *              struct strata_pyframe py[npy];
	 *              uint64_t native[nnative];
	 *              char task_name[task_name_len]; */
};

/* ---- both processes --------------------------------------------------- */

uint64_t mono_ns(void);
uint64_t agent_new_stream_id(void);
/* Samples per second as the profile states it (0: event-driven, not a clock). */
unsigned agent_rate_hz(void);
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Posts a NOTE (kind: enum note_kind; tid 0 for the whole process) for
 * the writer, and logs it on the program's standard error. */
void agent_note(uint32_t kind, uint32_t tid, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Moves a descriptor the agent opens in the profiled process out of the
 * program's way: above 511, or near the top of a lower RLIMIT_NOFILE
 * (close-on-exec). Returns the new number (fd itself if it cannot move).
 * Async-signal-safe; keeps errno. */
int fd_high(int fd);
/* Takes a process-shared robust mutex the helper also takes, waiting at
 * most REG_WAIT_NS, or REG_STALLED_WAIT_NS while *stalled (the last wait
 * timed out: the holder is stopped or starved; cleared once the mutex is
 * had). 0: held (a dead holder's is made consistent); -1: not. */
#define REG_WAIT_NS 2000000000ll
#define REG_STALLED_WAIT_NS 100000000ll
int lock_bounded(pthread_mutex_t *m, _Atomic int *stalled);
/* After a call failed with err: ": RLIMIT_NOFILE is N" into buf when err
 * is EMFILE (the process's own descriptor limit), else "". */
int fd_limit_note(char *buf, size_t n, int err);
/* Appends to `output` a stream of one record saying process pid (running
 * exe, Python `version`) was not profiled (PROC_UNSUPPORTED). */
/* refused: a module was found but does not fit this interpreter (PROC_REFUSED). */
void agent_note_unsupported(const char *output, pid_t pid, pid_t ppid, const char *version, const char *exe,
			    int refused);
/* The same for a process that was not profiled for another reason (flags:
 * PROC_*; PROC_UNSUPPORTED | PROC_NOT_PROFILED when the agent could not
 * start), with a NOTE saying why when `why` is set. */
void agent_note_unprofiled(const char *output, pid_t pid, pid_t ppid, const char *version, const char *exe,
			   uint32_t flags, const char *why);

/* slots.c */
struct tslot *slot_new(pid_t tid, const char *name);   /* allocated, not listed */
/* Into the list (and tid table), unless a live slot for s's tid is in the
 * tid table already: then that one is returned and s is not linked.
 * bounded (the profiled process): NULL when the list could not be had
 * (reg_lock_bounded), s not linked. */
struct tslot *slot_link(struct tslot *s, int bounded);
void slot_free(struct tslot *s);
struct tslot *slot_by_tid(pid_t tid);                  /* handler-safe */
int slot_in_tidtab(const struct tslot *s);
/* Caller holds reg_lock, or is the slot's own thread ending without it
 * (thread_unregister: a stopped helper holds it). */
void tidtab_del(struct tslot *s);
void reg_lock(void);
void reg_unlock(void);
/* The profiled process's way to take the list: lock_bounded (util.c).
 * A stopped helper must not hang the program's thread starts, exits and
 * forks. 0: held; -1: not (the caller does without). */
int reg_lock_bounded(void);
/* The helper's, where one process must not hold up the others it serves
 * (a stopped thread of it holding its list): waits at most ms. 0: held. */
int reg_lock_for(int ms);

/* triggers.c */
/* Opens thread tid's trigger into the slot (the caller's descriptors);
 * armed if sampling is on. own: the calling thread is tid. */
int trigger_open(struct tslot *s, pid_t tid);
void trigger_close(struct tslot *s);
/* Before an exec, for the calling thread's slot: its event must not
 * signal the new program, whose SIGPROF is back to the default (death).
 * Disabled, its signal switched off (if the descriptor is still ours),
 * and its group unmapped: a fork child that closed every descriptor
 * (subprocess before 3.10 does) holds its events by their mappings
 * alone, and an overflow during the exec's own kernel work, before the
 * kernel removes the event, stays pending into the new program.
 * Async-signal-safe. */
void trigger_quiet_for_exec(struct tslot *s);
/* A POSIX CPU-time timer on thread tid of this process (no descriptor):
 * the trigger where perf events are not allowed, and where the helper
 * could open no more of them. */
int trigger_open_timer(struct tslot *s, pid_t tid);
/* -e, a mapped group: the counts of its latest overflow into vals
 * (ncounters values), consuming the ring. Returns the number of values,
 * 0 if no overflow was written since, -1 if the group is not mapped.
 * Async-signal-safe. */
int trigger_counts(struct tslot *s, uint64_t *vals);
/* Whether descriptor fd is still this slot's -e leader (the program may
 * have closed ours and reused the number). Async-signal-safe. */
int trigger_is_ours(struct tslot *s, int fd, int idx);
/* Arms or disarms a perf event: refresh (one overflow, re-armed by the
 * handler) or free running. */
void trigger_fd_enable(int fd, int on, int refresh);
/* The event of fd disabled and its overflow signal off (O_ASYNC belongs
 * to the open file: every copy of it falls silent). Async-signal-safe. */
void trigger_fd_silence(int fd);
/* Arms or disarms a POSIX timer trigger (its own process only). */
void trigger_timer_arm(struct tslot *s, int on);
int sampler_pick_trigger(void);

/* ---- the profiled process ---------------------------------------------- */

extern const struct strata_pyapi *agent_py;
int agent_safe_read(void *dst, uint64_t src, size_t n);
void agent_shutdown(int reason);
void agent_resume(void);

/* signals.c */
int signals_install(void);
int signals_guard_check(void);
void signals_retake_prof(void);
int signals_app_handles(int sig);
/* Of the signals `sigs` (bit sig-1), the program's own that run a handler
 * of the program; *interrupting: those of them without SA_RESTART.
 * Async-signal-safe. */
uint64_t signals_handled(uint64_t sigs, uint64_t *interrupting);
/* Every signal but the synchronous ones (faults): the mask of our SIGPROF
 * handler. */
void signals_all_but_faults(sigset_t *set);
extern int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
void signals_resolve(void);

/* handoff.c: of the program signals `sigs` (bit sig-1) pending for the
 * calling thread at the end of its sample, leaves those sent to the
 * process to the leader when the leader can take them, waiting (bounded)
 * until it has; returns those still pending, for this thread to take.
 * Async-signal-safe; called only with every program signal blocked. */
uint64_t handoff_settle(uint64_t sigs);
/* For the program's handler of sig (signals.c, on_program): 1 if the
 * signal this thread got was sent to the process and the leader can take
 * it, and it was passed on to the leader; the leader's copy then comes
 * with a siginfo of ours, for which handoff_original returns the
 * original (in buf), or si as it is. Async-signal-safe. */
int handoff_reroute(int sig, const siginfo_t *si);
siginfo_t *handoff_original(int sig, siginfo_t *si, siginfo_t *buf);

/* sampler.c */
int sample_signal_dispatch(int sig, siginfo_t *si, void *uc);
/* Before an exec the helper did not finish in time: the event it holds
 * for thread s, switched off through a copy (pidfd_getfd). */
void sample_quiet_helper_trigger(struct tslot *s);
/* An allocation sample (objects-sample.c): the calling thread's stack
 * with the AW_N words of objects.h; uc: registers to unwind from
 * (--native), or NULL. Returns 0, or -1 if the ring was full. */
int sample_alloc_capture(struct tslot *s, const void *uc, const uint64_t *words);
void sample_alloc_init(void);

/* threads.c */
struct tslot *thread_register(const char *name, int is_main);
struct tslot *thread_register_self(const char *name);
void thread_set_name(struct tslot *s, const char *name);
void thread_unregister(struct tslot *s);
/* dlopen mode: registers the threads running now. */
void threads_register_existing(void);

/* code deaths (agent.c): what the module's deallocation hook asks */
int code_death_wanted(uint64_t addr);
void code_death(uint64_t addr, struct strata_codeinfo *info);

/* jit.c (handler) */
int jit_active(void);
int jit_leaf_capture(const void *uc, uint64_t *out, uint8_t *flags);

/* process.c: what exec'd children inherit after the output changed. */
const char *process_env_output(void);

#endif

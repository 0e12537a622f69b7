/*
 * agent.h — shared state of the in-process agent (libstrata-agent.so).
 *
 * Module map:
 *   agent.c      lifecycle: constructor/destructor, configuration, loading
 *                the per-version Python module, fork and exit handling
 *   signals.c    our handlers for SIGPROF/SIGSEGV/SIGBUS and the interposed
 *                sigaction()/signal() that keep them installed and chain to
 *                the application's handlers
 *   sampler.c    triggers (perf task-clock, POSIX CPU timer, wall sampler)
 *                and the signal-safe sample capture
 *   threads.c    the thread registry and the interposed pthread_create()
 *   process.c    interposed fork/exec/_exit: flush before the image goes away
 *   writer.c     the writer thread: drains rings, interns code objects and
 *                stacks, compresses and appends chunks to the output
 *   ring.c       per-thread SPSC sample rings
 *   unwind.c     --native: module map, CFI tables, the in-handler unwinder
 *   sleeps.c     interposed nanosleep/select/poll/...: SIGPROF held inside
 *                the calls a handler would cut short with EINTR
 *   control.c    the control channel: a Unix socket per process (and the
 *                same commands for in-process callers): sampling on/off,
 *                status, dump, attaching and detaching an output
 *
 * Everything reached from the signal handler (struct tslot, the ring, the
 * config and pyapi pointers) is set up before the handler can run and is
 * read-only or atomic afterwards.
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

#include "pyapi.h"
#include "ring.h"
#include "../common/events.h"

#define AGENT_EXPORT __attribute__((visibility("default")))
#define AGENT_MAX_OWN 8
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
	char output[4096];
};

/* One registered thread. Created by the thread itself (in the pthread_create
 * trampoline, or the constructor for the main thread), freed by the writer
 * after the thread exited and its ring is drained. */
struct tslot {
	struct tslot *next;          /* registry list, under agent.reg_lock */
	pid_t tid;
	pthread_t pthread;
	uint64_t start_ns, end_ns;
	struct ring ring;

	/* trigger */
	int trigger_fd;              /* perf event fd (-e: the group leader), or -1 */
	int counter_fd[EVENTS_MAX];  /* -e: the group's other events (index 0 unused), or -1 */
	uint64_t counter_prev[EVENTS_MAX]; /* group values at this thread's last sample */
	uint32_t ncounters;          /* events in this thread's group; 0 = none */
	timer_t timer;
	int has_timer;
	int stat_fd;                 /* /proc/self/task/TID/stat (wall mode) */
	_Atomic int wall_pending;    /* sampler sent us a signal */

	/* handler state */
	volatile sig_atomic_t in_handler;
	sigjmp_buf guard_jb;
	volatile sig_atomic_t guard_on;
	void *tstate;                /* last PyThreadState seen (wall sampler reads it) */
	/* The unwind-table snapshot the handler is using (unwind.c); the
	 * writer frees no snapshot a slot holds. */
	_Atomic(void *) unwind_hazard;
	volatile int native_progress; /* frames stored so far, for a faulting unwind */

	_Atomic uint64_t samples;    /* samples pushed */
	_Atomic uint64_t dropped;    /* samples lost: ring full or faults */
	_Atomic int exited;

	/* Registered from outside by tid (threads_scan, when the agent was
	 * loaded with dlopen and threads predate it): no TLS destructor tells
	 * us it ended, the scan does. `proc_start` (starttime in
	 * /proc/self/task/TID/stat) tells a reused tid from the thread. */
	int external;
	unsigned long long proc_start;
	uint32_t scan_gen;

	/* writer-only state */
	int announced;
	char name[64];
	_Atomic int name_dirty;
	uint64_t reported_dropped;
};

struct agent {
	int active;                  /* configured, Python found, module loaded */
	int configured;              /* STRATA_OUTPUT set: interposers act */
	pid_t pid;
	uint64_t stream;             /* current stream id */
	uint32_t stream_flags;       /* PROC_* flags of the current stream */
	uint64_t start_ns;
	int trigger;                 /* enum trigger_kind actually used */
	struct agent_config cfg;
	const struct strata_pyapi *py;
	char python_version[64];

	pthread_mutex_t reg_lock;
	struct tslot *slots;

	_Atomic int sampling;        /* handler records samples only when set */
	_Atomic int stopping;        /* process teardown started */
	_Atomic int finished;        /* teardown wrote the stream's end */
	pthread_t writer, sampler;
	int writer_running, sampler_running;

	/* The wall-mode sampler's own ring for samples of idle threads. */
	struct tslot *sampler_slot;

	/* No output at start (STRATA_AGENT=1, or loaded by the Python module):
	 * the agent waits for `attach` on its control channel. */
	int standby;
	/* Loaded with dlopen: threads that predate the agent are found by
	 * scanning /proc/self/task and their slots looked up by tid. */
	int by_tid;
	/* The agent's own threads (real_thread_create), never sampled or
	 * registered by a scan. */
	_Atomic pid_t own_tids[AGENT_MAX_OWN];
	/* Samples and drops of threads already retired (status totals). */
	_Atomic uint64_t retired_samples, retired_dropped;
};



extern struct agent agent;

/* Code objects the handler has seen, as a lossy bitmap: one byte store per
 * frame in the handler, one load in the deallocation hook. A false
 * positive only costs keeping a dead code object's name a little longer. */
#define CODE_SEEN_SIZE (1u << 20)
extern uint8_t *code_seen;
static inline uint32_t code_seen_slot(uint64_t addr)
{
	return (uint32_t)((addr >> 4) * 0x9E3779B97F4A7C15ull >> 44) & (CODE_SEEN_SIZE - 1);
}
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
	uint8_t stack_flags;
	uint8_t sample_flags;
	uint8_t pad;
	/* followed by: uint64_t counters[ncounters];
	 *              struct strata_pyframe py[npy];
	 *              uint64_t native[nnative]; */
};

/* agent.c */
uint64_t mono_ns(void);
uint64_t agent_new_stream_id(void);
/* Samples per second as the profile states it (0: event-driven, not a clock). */
unsigned agent_rate_hz(void);
int agent_safe_read(void *dst, uint64_t src, size_t n);
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void agent_shutdown(int reason);
void agent_resume(void);
/* From a fatal signal's handler: have the writer finish the stream, waiting
 * a bounded time. Async-signal-safe (atomics, a pipe write, nanosleep). */
void agent_flush_before_death(int sig);

/* signals.c */
int signals_install(void);
/* dlopen mode (nothing interposes sigaction): put our SIGSEGV/SIGBUS
 * handlers back if the program replaced them (signal-safe; 0 = in place),
 * and our SIGPROF handler (writer thread). */
int signals_guard_check(void);
void signals_retake_prof(void);
int signals_app_handles(int sig);
extern int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
void signals_resolve(void);

/* sampler.c */
int trigger_start(struct tslot *s);
void trigger_stop(struct tslot *s);
/* In a fork child: closes the descriptors a slot inherited from the parent
 * (they are the parent's events: never disable them, just let go). */
void trigger_forget(struct tslot *s);
/* Called from the SIGPROF handler; returns 1 if the signal was ours. */
int sample_signal_dispatch(int sig, siginfo_t *si, void *uc);
/* Turns sampling on or off in every registered thread (pause/resume). */
void triggers_set_enabled(int on);
/* Sets the sampling rate for triggers armed from now on; -1 if the
 * trigger has no rate (events: a period of occurrences). */
int triggers_set_rate(unsigned hz);
int sampler_start(void);                               /* wall mode thread */
void sampler_stop(void);
int sampler_pick_trigger(void);

/* threads.c */
struct tslot *thread_register(const char *name, int is_main);
/* By-tid registration (agent.by_tid): handler-safe lookup, and the scan
 * that registers threads the pthread_create wrapper never saw and retires
 * those that ended. */
struct tslot *slot_by_tid(pid_t tid);
void threads_scan(void);
/* The calling thread, registered (or renamed) by itself: for callers from
 * Python in a dlopen'ed agent. */
struct tslot *thread_register_self(const char *name);
void thread_unregister(struct tslot *s);
void threads_after_fork_child(void);
int real_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);
void slot_free(struct tslot *s);

/* writer.c */
int writer_start(void);
void writer_stop_and_flush(int reason);
void writer_after_fork_child(void);
void writer_note_unsupported(void);
/* Deallocation hook target: keeps a sampled code object's contents. */
int writer_code_wanted(uint64_t addr);
void writer_code_died(uint64_t addr, struct strata_codeinfo *info);
void writer_poke(void);
/* Sampling is about to start: code deaths matter again. */
void writer_set_busy(void);
/* Asks the writer to end the stream now (END_SIGNAL); returns when done or
 * after timeout_ms. Async-signal-safe. */
void writer_finish_urgent(int timeout_ms);
void writer_lock_for_fork(void);
void writer_unlock_after_fork(void);
/* Starts the writer without an output (standby). */
int writer_start_standby(void);
/* After a failed exec: carries on with the output it had, or without. */
int writer_resume(void);
/* Output control for control.c. attach: fd (>= 0) or path names the new
 * output; with create_session the agent writes the file header and a
 * session of its own first (the file must be empty). */
int writer_attach(int fd, const char *path, int create_session, char *err, size_t errlen);
int writer_detach(char *err, size_t errlen);
/* Copies what the output holds so far, as a finished profile, to dst. */
int64_t writer_dump(int dst, char *err, size_t errlen);
void writer_flush_now(void);
/* The current output's path into buf ("" when there is none); returns
 * whether there is an output. */
int writer_output(char *buf, size_t n);

/* control.c */
int control_start(void);
void control_stop(void);
void control_after_fork_child(void);
/* From a fatal signal's handler: remove our socket (signal-safe). */
void control_unlink_socket(void);
/* Runs one control request (the socket's message format, see
 * common/ctlproto.h); fd is an attached descriptor or -1 and is consumed.
 * Writes the reply ("ok\n..." or "error: ...") into reply. */
void control_exec(const char *req, int fd, char *reply, size_t n);

struct wbuf;
/* jit.c (the listener API is jit.h) */
/* Writer pass: finds JIT images registered or unregistered since the last
 * pass, appends their records to recs (NULL: no output) and updates the
 * handler's table. */
void jit_poll(struct wbuf *recs);
/* A new stream starts: announce every live image again. */
void jit_stream_reset(void);
/* Whether any JIT code is known (the handler then looks for it). */
int jit_active(void);
/* Handler, without --native: stores in out[0] the interrupted pc if it is
 * in JIT code, or the return address into JIT code of the function JIT
 * code called (setting STACK_JIT_RETURN); returns 1, or 0 when the thread
 * is not in JIT code. Must run under the capture's fault guard. */
int jit_leaf_capture(const void *uc, uint64_t *out, uint8_t *flags);
uint64_t jit_images_seen(void);

/* process.c: what exec'd children inherit after the output changed. */
void process_env_set_output(const char *path);

#endif

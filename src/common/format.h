/*
 * format.h — the .strata file format (docs/format.md is the prose spec).
 *
 * A file is a 32-byte file header followed by self-checking chunks appended
 * by any number of writers (the CLI and every profiled process append whole
 * chunks with O_APPEND). A chunk belongs to one *stream* (one process image:
 * a fork or an exec starts a new stream) and holds a compressed run of
 * records. Records are `varint type, varint length, body`; bodies are
 * sequences of varints and length-prefixed strings whose fields are only
 * ever appended in later minor versions, so an older reader skips what it
 * does not know and names it.
 *
 * This header owns the constants, the header/chunk framing and the record
 * bodies (encode for the agent and CLI, decode for the CLI).
 */
#ifndef STRATA_FORMAT_H
#define STRATA_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define STRATA_MAGIC "\x89STRATA\n"
#define STRATA_MAGIC_LEN 8
#define STRATA_FMT_MAJOR 1
#define STRATA_FMT_MINOR 4
#define STRATA_FILE_HDR_SIZE 32

#define STRATA_CHUNK_MAGIC 0x4b484353u /* "SCHK" little-endian */
#define STRATA_CHUNK_HDR_SIZE 40
/* Upper bounds a reader enforces so that garbage never drives allocations. */
#define STRATA_CHUNK_MAX_RAW (64u << 20)
#define STRATA_CHUNK_MAX_STORED (64u << 20)

enum chunk_codec { CODEC_NONE = 0, CODEC_ZSTD = 1 };
enum chunk_flags {
	CHUNK_LAST = 1 << 0, /* final chunk of its stream: the process ended cleanly */
};

struct file_header {
	uint16_t major, minor;
	uint32_t header_size;
	uint64_t created_ns; /* CLOCK_REALTIME */
	uint32_t flags;
};

struct chunk_header {
	uint64_t stream;
	uint32_t seq;
	uint16_t codec, flags;
	uint32_t raw_size, stored_size;
	uint32_t payload_crc;
};

void file_header_pack(uint8_t out[STRATA_FILE_HDR_SIZE], const struct file_header *h);
/* Returns 0, or a negative FMT_E* code describing what is wrong. */
int file_header_parse(const uint8_t *p, size_t n, struct file_header *h);

void chunk_header_pack(uint8_t out[STRATA_CHUNK_HDR_SIZE], const struct chunk_header *h);
int chunk_header_parse(const uint8_t *p, struct chunk_header *h); /* checks magic + header CRC */

/* Compresses `raw` into a complete chunk (header + payload) appended to `out`.
 * level: zstd level (1..19). Returns 0 or -1 on OOM / compression failure. */
int chunk_seal(struct wbuf *out, const void *raw, size_t raw_len, uint64_t stream, uint32_t seq,
	       uint16_t flags, int level);
/* The same chunk with its payload stored uncompressed: what the agent in the
 * profiled process writes (it links no compressor, so that no copy of
 * libzstd of ours sits in the program's symbol scope; see the Makefile). */
int chunk_seal_stored(struct wbuf *out, const void *raw, size_t raw_len, uint64_t stream, uint32_t seq,
		      uint16_t flags);
/* Verifies and decompresses a chunk's payload into `out` (reset first).
 * Returns 0 or a negative FMT_E* code. */
int chunk_open(const struct chunk_header *h, const uint8_t *stored, struct wbuf *out);

enum fmt_error {
	FMT_OK = 0,
	FMT_E_SHORT = -1,     /* not enough bytes */
	FMT_E_MAGIC = -2,     /* not a .strata file */
	FMT_E_VERSION = -3,   /* newer major version */
	FMT_E_HDRCRC = -4,    /* header checksum mismatch */
	FMT_E_CRC = -5,       /* payload checksum mismatch */
	FMT_E_CODEC = -6,     /* unknown codec */
	FMT_E_DECOMPRESS = -7,
	FMT_E_SIZE = -8,      /* implausible size */
	FMT_E_OOM = -9,
};
const char *fmt_strerror(int err);

/* ---- records ---------------------------------------------------------- */

enum rec_type {
	REC_SESSION = 1,      /* written by the CLI when a recording starts */
	REC_SESSION_END = 2,  /* written by the CLI when the command exits */
	REC_PROCESS = 3,      /* first record of every process stream */
	REC_PROCESS_END = 4,
	REC_THREAD = 5,
	REC_THREAD_NAME = 6,
	REC_THREAD_END = 7,
	REC_CODE = 8,         /* a Python code object */
	REC_STACK = 9,        /* an interned stack */
	REC_SAMPLE = 10,
	REC_DROPPED = 11,     /* samples lost (ring full) */
	/* Reserved for the capabilities that plug into this skeleton; a reader
	 * that does not handle one skips it and says so. */
	REC_MODULE = 12,      /* native module mapping (path, build id, range) */
	REC_JIT_IMAGE = 13,   /* in-memory ELF registered through the GDB JIT interface */
	REC_JIT_UNLOAD = 14,
	REC_PERFMAP = 15,     /* /tmp/perf-PID.map entries */
	REC_EVENT_DESC = 16,  /* details of a recorded perf event */
	REC_CONTROL = 17,     /* sampling paused / resumed */
	/* 1.1: object and allocation samples (strata record --objects) */
	REC_OBJ_TYPE = 18,    /* an interned object type name */
	REC_ALLOC = 19,       /* a sampled allocation, with its stack */
	REC_ALLOC_TYPE = 20,  /* the type of an allocation, learnt after it was written */
	REC_FREE = 21,        /* a sampled allocation was freed */
	/* 1.2: asyncio tasks (docs/async.md) */
	REC_TASK = 22,        /* an interned asyncio task (its name) */
	/* 1.3 */
	REC_NOTE = 23,        /* what the agent could not do, and why (a limit, a closed descriptor) */
	REC_TYPE_MAX_KNOWN = 23, /* highest type this build decodes (bump as types land) */
};
const char *rec_type_name(uint64_t type);
/* Whether this build decodes records of `type`: every type up to
 * REC_TYPE_MAX_KNOWN except the reserved ones not handled yet, which a
 * reader skips and names like a newer version's. */
int rec_type_known(uint64_t type);

enum prof_mode { MODE_CPU = 0, MODE_WALL = 1 };
enum trigger_kind {
	TRIGGER_PERF_TASK_CLOCK = 0, /* perf_event_open software task-clock, per thread */
	TRIGGER_POSIX_CPU_TIMER = 1, /* timer_create(CLOCK_THREAD_CPUTIME_ID) fallback */
	TRIGGER_WALL_SAMPLER = 2,    /* sampler thread at wall-clock rate */
	TRIGGER_PERF_EVENT = 3,      /* user-chosen perf event (-e) */
};
enum linetable_fmt {
	LT_NONE = 0,
	LT_LNOTAB = 1,     /* 3.8, 3.9 co_lnotab */
	LT_LINETABLE = 2,  /* 3.10 co_linetable (PEP 626) */
	LT_LOCATIONS = 3,  /* 3.11+ co_linetable location table (PEP 657) */
};

enum process_end_reason {
	END_EXIT = 0,   /* exit() or return from main */
	END_EXEC = 1,   /* replaced by exec() */
	END__EXIT = 2,  /* _exit(), as os._exit and multiprocessing children use */
	END_DETACH = 3, /* profiling stopped while the process runs on */
	END_SIGNAL = 4, /* terminated by a signal whose default action kills */
};
enum process_flags {
	PROC_NATIVE = 1 << 0,
	PROC_JIT_LINES = 1 << 1,
	PROC_CONTINUED = 1 << 2,   /* stream resumed after a failed exec */
	PROC_UNSUPPORTED = 1 << 3, /* Python version without an agent build: not profiled */
	PROC_REFUSED = 1 << 4,     /* with PROC_UNSUPPORTED: a module exists but cannot read this
	                            * interpreter (layout, build kind); the agent said why on stderr */
	PROC_OBJECTS = 1 << 5,     /* allocations sampled (--objects): rec_process.objects_rate */
	PROC_NOT_PROFILED = 1 << 6, /* with PROC_UNSUPPORTED (1.3): a supported Python whose agent could
	                            * not start; a NOTE record says why */
};
enum thread_flags { THREAD_MAIN = 1 << 0 };
enum stack_flags {
	STACK_PY_TRUNCATED = 1 << 0,     /* Python depth cap hit: root frames missing */
	STACK_PY_FAULT = 1 << 1,         /* walking the Python frames faulted: partial */
	STACK_NATIVE_TRUNCATED = 1 << 2, /* native depth cap hit */
	STACK_NATIVE_FAILED = 1 << 3,    /* native unwinding stopped early */
	STACK_PY_STARTUP = 1 << 4,       /* no Python frames: the interpreter was starting */
	STACK_PY_SHUTDOWN = 1 << 5,      /* no Python frames: the interpreter was shutting down */
	/* Without --native, a thread in JIT code: native[] holds one address
	 * in JIT code (STACK_JIT_LEAF), the interrupted pc, or, when JIT code
	 * had called out (libm's sin, Numba's runtime), the return address
	 * into JIT code found on the stack (STACK_JIT_RETURN too). */
	STACK_JIT_RETURN = 1 << 6,
	STACK_JIT_LEAF = 1 << 7,
	/* The thread was running CPython's cyclic garbage collector (its
	 * callbacks and the finalizers it calls included). */
	STACK_GC = 1 << 8,
};
enum pyframe_flags {
	PYF_ENTRY = 1 << 0, /* frame entered from C (one C-level eval activation starts here) */
	/* With STACK_GC: the collection started while this frame ran (3.15+
	 * say which frame; elsewhere no frame carries it). */
	PYF_GC = 1 << 1,
	/* 1.2: a frame of a suspended task awaiting the running one (or of a
	 * waiting task's chain): not on the thread's stack. */
	PYF_AWAITER = 1 << 2,
};
enum sample_flags {
	SAMPLE_IDLE = 1 << 0,         /* thread was blocked (wall mode) */
	/* 1.2: a suspended asyncio task's sample (wall mode): its await chain,
	 * taken by the helper, not a thread's stack. */
	SAMPLE_TASK_WAITING = 1 << 1,
};
/* 1.2: a task boundary in a stack (rec_stack.tasks). */
enum task_frame_flags {
	TASKF_OTHERS = 1 << 0, /* other tasks await this one too: the chain above follows one of them */
};

struct rec_session {
	char *strata_version;
	uint64_t start_realtime_ns, start_mono_ns;
	uint32_t argc;
	char **argv; /* the command strata ran */
	uint32_t mode, rate_hz, flags;
	uint32_t nevents;
	char **events;
	char *hostname;
};

struct rec_session_end {
	uint64_t end_mono_ns;
	int64_t status; /* >= 0: exit code; < 0: killed by signal -status */
};

struct rec_process {
	uint32_t pid, ppid;
	uint64_t start_mono_ns;
	char *python_version;
	char *executable;
	uint32_t argc;
	char **argv;
	uint32_t mode, rate_hz, trigger;
	uint64_t period_ns;
	uint32_t flags;
	uint32_t nevents;
	char **events;
	uint64_t objects_rate; /* 1.1: mean bytes between allocation samples, 0 = none */
};

struct rec_process_end {
	uint64_t end_mono_ns;
	uint32_t reason;
	uint64_t samples, dropped;
};

struct rec_thread {
	uint32_t tid;
	uint64_t start_mono_ns;
	uint32_t flags;
	char *name;
};

struct rec_thread_name {
	uint32_t tid;
	char *name;
};

struct rec_thread_end {
	uint32_t tid;
	uint64_t end_mono_ns;
	uint64_t samples, dropped;
};

struct rec_code {
	uint32_t index;     /* per-stream id that STACK records refer to */
	uint64_t addr;      /* address of the code object in the target (diagnostics) */
	uint32_t firstlineno;
	uint32_t linetable_fmt;
	uint32_t flags;     /* CO_* flags of the code object */
	char *filename, *name, *qualname;
	uint8_t *linetable;
	size_t linetable_len;
};

struct rec_pyframe {
	uint32_t code;  /* REC_CODE index */
	int32_t lasti;  /* instruction offset in code units (2 bytes); -1 = not started */
	uint32_t flags; /* PYF_* */
};

/* 1.2: where a stack crosses into a task: py[at] is the outermost frame
 * (the coroutine) of task `task` (a REC_TASK index); the frames leaf-side
 * of it, to the previous boundary, are the task's. */
struct rec_task_frame {
	uint32_t at;
	uint32_t task;
	uint32_t flags;         /* TASKF_* */
};

struct rec_stack {
	uint32_t index;
	uint32_t flags;
	uint32_t npy;
	struct rec_pyframe *py; /* leaf first */
	uint32_t py_missing;    /* frames cut by the depth cap (when STACK_PY_TRUNCATED) */
	uint32_t nnative;
	uint64_t *native;       /* return addresses, leaf first (with --native) */
	/* 1.2: asyncio. The Python frames are the logical stack: the running
	 * task's, then the frames of each task awaiting it, and from py[loop_at]
	 * on (0: none) the frames that ran the event loop. */
	uint32_t ntasks;
	struct rec_task_frame *tasks; /* innermost task first */
	uint32_t loop_at;
};

struct rec_task {
	uint32_t index;         /* per stream, REC_STACK task boundaries refer to it */
	uint64_t addr;          /* the task object (diagnostics) */
	char *name;             /* create_task(name=...), else Task-N */
};
void rec_put_task(struct wbuf *b, const struct rec_task *r);
int rec_get_task(struct rbuf *b, struct rec_task *r); /* free r->name */

#define STRATA_MAX_COUNTERS 8

struct rec_sample {
	uint32_t tid;
	int64_t dt_ns;      /* time since the previous sample record of this stream
	                     * (first: since process start); may be negative */
	uint32_t stack;
	uint32_t weight;    /* sampling periods this sample stands for (>= 1) */
	uint32_t flags;     /* SAMPLE_* */
	uint32_t ncounters;
	uint64_t counters[STRATA_MAX_COUNTERS];
	uint32_t wait;      /* 1.4, SAMPLE_IDLE: why the thread waited (WAITR_*), 0 not known */
};

/* 1.4: why a blocked thread waits (wall mode), told by the helper from the
 * thread's system call and the interpreter's GIL. */
enum wait_reason {
	WAITR_UNKNOWN = 0,
	WAITR_GIL = 1,      /* for the GIL (a futex in the interpreter's GIL state) */
	WAITR_IO = 2,       /* reading, writing, sending, receiving, accepting, connecting, syncing */
	WAITR_POLL = 3,     /* select, poll, epoll */
	WAITR_SLEEP = 4,    /* nanosleep, clock_nanosleep, a select on no file */
	WAITR_LOCK = 5,     /* another futex (a lock, a condition, a semaphore), flock, a semaphore set */
	WAITR_CHILD = 6,    /* wait4, waitid */
	WAITR_SIGNAL = 7,   /* pause, sigsuspend, sigtimedwait */
	WAITR_SYSCALL = 8,  /* another system call */
	WAITR_NOSYSCALL = 9, /* blocked outside any system call (a page fault, stopped) */
	WAITR_MAX_KNOWN = 9,
};
/* The marker frame a reader shows for reason w ("[waiting for the GIL]"),
 * and a short key for it ("gil"); NULL for WAITR_UNKNOWN or one this build
 * does not know. */
const char *wait_reason_frame(uint32_t w);
const char *wait_reason_key(uint32_t w);
/* A few words for a table ("GIL", "I/O", "select/poll", "sleep", ...). */
const char *wait_reason_short(uint32_t w);

struct rec_dropped {
	uint32_t tid;
	uint64_t count;
};

/* What the agent of a process could not do, in one line a person reads
 * (shown by record's summary and as a warning of every command). */
enum note_kind {
	NOTE_NOT_PROFILED = 1, /* the process runs on unprofiled (the agent could not start) */
	NOTE_LIMITED = 2,      /* a resource limit cut what is recorded (shared memory, rings) */
	NOTE_STOPPED = 3,      /* sampling (of thread tid, or of the process) stopped early */
};
struct rec_note {
	uint32_t tid;       /* 0: the whole process */
	uint64_t time_ns;   /* monotonic */
	uint32_t kind;      /* enum note_kind */
	char *text;
};

enum module_flags {
	MOD_MAIN = 1 << 0,      /* the program's executable */
	MOD_VDSO = 1 << 1,      /* the kernel's vDSO: no file, `image` holds its ELF */
	MOD_UNLOADED = 1 << 2,  /* the mapping went away (dlclose): forget this range */
	MOD_NO_CFI = 1 << 3,    /* no unwind information: stacks through it stop there */
};

/* One executable mapping of a native object (--native). An object with
 * several executable segments has one record per segment. A record with
 * MOD_UNLOADED ends the life of the same range; a later record for an
 * overlapping range describes a new object. */
struct rec_module {
	uint64_t start, end;    /* [start, end) in the process */
	uint64_t offset;        /* file offset mapped at start */
	uint64_t bias;          /* load bias: address - bias = address in the ELF file */
	uint32_t flags;         /* MOD_* */
	char *path;             /* absolute path, "[vdso]" for the vDSO */
	uint8_t *build_id;
	size_t build_id_len;
	uint8_t *image;         /* the ELF image of an object that has no file (vDSO), else empty */
	size_t image_len;
};

enum event_desc_flags {
	EVD_SAMPLING = 1 << 0,  /* drives sampling: a sample every `period` occurrences per thread */
	EVD_USER_ONLY = 1 << 1, /* counted in user space only (perf_event_paranoid) */
	EVD_CLOCK = 1 << 2,     /* counts nanoseconds (cpu-clock, task-clock) */
};

/* One event recorded with -e, written by each process after REC_PROCESS:
 * `index` is its position in the events list, which is also the position
 * of its value in every SAMPLE's counters. */
struct rec_event_desc {
	uint32_t index;
	char *name;             /* as perf spells it: "cycles", "page-faults", "r01c2" */
	uint32_t type;          /* perf_event_attr.type (PERF_TYPE_*) */
	uint64_t config;        /* perf_event_attr.config */
	uint64_t period;        /* sampling period in occurrences (ns for clocks); 0 = counted only */
	uint32_t flags;         /* EVD_* */
};

/* One in-memory ELF object registered through the GDB JIT interface
 * (__jit_debug_register_code). Its section headers hold the run-time
 * addresses (sh_addr) of the loaded sections; symbols are section-relative
 * (ET_REL); debug sections are unrelocated (the reader applies their
 * .rela sections against those addresses). */
struct rec_jit_image {
	uint64_t id;            /* unique within the stream's process */
	uint64_t start, end;    /* [start, end): the executable sections' span */
	uint64_t time_ns;       /* CLOCK_MONOTONIC when the agent found it */
	uint32_t flags;         /* none yet */
	uint8_t *image;         /* the ELF bytes */
	size_t image_len;
};

/* The image `id` was unregistered (its code freed): forget its range. */
struct rec_jit_unload {
	uint64_t id;
	uint64_t time_ns;
};

/* ---- object and allocation samples (1.1, format-objects.c) ---- */

/* Where an allocation came from: CPython's allocator domains, or the C
 * library's malloc family called directly (a C extension). */
enum alloc_domain { ALLOC_RAW = 0, ALLOC_MEM = 1, ALLOC_OBJ = 2, ALLOC_MALLOC = 3, ALLOC_NDOMAINS = 4 };
enum alloc_flags {
	ALLOC_UNTRACKED = 1 << 0, /* its free could not be watched (table full): live unknown */
};
/* The name a block with no object type is shown under. */
const char *alloc_domain_name(uint32_t domain);

struct rec_obj_type {
	uint32_t index;         /* >= 1, per stream; REC_ALLOC.type refers to it */
	char *name;             /* "dict", "numpy.ndarray", "Outer.Inner" */
};

struct rec_alloc {
	uint32_t tid;
	int64_t dt_ns;          /* as REC_SAMPLE's: the stream's clock runs through both */
	uint32_t stack;
	uint64_t id;            /* unique within the stream */
	uint64_t size;          /* bytes requested */
	uint32_t domain;        /* enum alloc_domain */
	uint32_t flags;         /* ALLOC_* */
	uint32_t type;          /* REC_OBJ_TYPE index, 0 = none (yet) */
};

struct rec_alloc_type {
	uint64_t id;
	uint32_t type;
};

struct rec_free {
	uint64_t id;
	uint64_t time_ns;       /* CLOCK_MONOTONIC */
};

void rec_put_obj_type(struct wbuf *b, const struct rec_obj_type *r);
void rec_put_alloc(struct wbuf *b, const struct rec_alloc *r);
void rec_put_alloc_type(struct wbuf *b, const struct rec_alloc_type *r);
void rec_put_free(struct wbuf *b, const struct rec_free *r);
int rec_get_obj_type(struct rbuf *b, struct rec_obj_type *r); /* free r->name */
int rec_get_alloc(struct rbuf *b, struct rec_alloc *r);
int rec_get_alloc_type(struct rbuf *b, struct rec_alloc_type *r);
int rec_get_free(struct rbuf *b, struct rec_free *r);

/* Encoders append one whole record (type, length, body) to `b`. */
void rec_put_session(struct wbuf *b, const struct rec_session *r);
void rec_put_session_end(struct wbuf *b, const struct rec_session_end *r);
void rec_put_process(struct wbuf *b, const struct rec_process *r);
void rec_put_process_end(struct wbuf *b, const struct rec_process_end *r);
void rec_put_thread(struct wbuf *b, const struct rec_thread *r);
void rec_put_thread_name(struct wbuf *b, const struct rec_thread_name *r);
void rec_put_thread_end(struct wbuf *b, const struct rec_thread_end *r);
void rec_put_code(struct wbuf *b, const struct rec_code *r);
void rec_put_stack(struct wbuf *b, const struct rec_stack *r);
void rec_put_sample(struct wbuf *b, const struct rec_sample *r);
void rec_put_dropped(struct wbuf *b, const struct rec_dropped *r);
void rec_put_note(struct wbuf *b, const struct rec_note *r);
void rec_put_module(struct wbuf *b, const struct rec_module *r);
void rec_put_event_desc(struct wbuf *b, const struct rec_event_desc *r);
void rec_put_jit_image(struct wbuf *b, const struct rec_jit_image *r);
void rec_put_jit_unload(struct wbuf *b, const struct rec_jit_unload *r);
/* Generic framing for record types encoded elsewhere: appends type, length and body. */
void rec_put_raw(struct wbuf *b, uint32_t type, const void *body, size_t len);

/* Splits the next record off a decompressed payload. Returns 1 with type and
 * body set, 0 at the end, -1 if the framing is malformed. */
int rec_next(struct rbuf *payload, uint64_t *type, struct rbuf *body);

/* Decoders: 0 on success, -1 if the body is malformed (short, bad lengths).
 * Trailing unknown fields are ignored. Strings and arrays are heap copies,
 * released with the matching rec_free_*; on error everything is released. */
int rec_get_session(struct rbuf *b, struct rec_session *r);
int rec_get_session_end(struct rbuf *b, struct rec_session_end *r);
int rec_get_process(struct rbuf *b, struct rec_process *r);
int rec_get_process_end(struct rbuf *b, struct rec_process_end *r);
int rec_get_thread(struct rbuf *b, struct rec_thread *r);
int rec_get_thread_name(struct rbuf *b, struct rec_thread_name *r);
int rec_get_thread_end(struct rbuf *b, struct rec_thread_end *r);
int rec_get_code(struct rbuf *b, struct rec_code *r);
int rec_get_stack(struct rbuf *b, struct rec_stack *r);
int rec_get_sample(struct rbuf *b, struct rec_sample *r);
int rec_get_dropped(struct rbuf *b, struct rec_dropped *r);
int rec_get_note(struct rbuf *b, struct rec_note *r);
int rec_get_module(struct rbuf *b, struct rec_module *r);
int rec_get_event_desc(struct rbuf *b, struct rec_event_desc *r);
int rec_get_jit_image(struct rbuf *b, struct rec_jit_image *r);
int rec_get_jit_unload(struct rbuf *b, struct rec_jit_unload *r);

void rec_free_session(struct rec_session *r);
void rec_free_process(struct rec_process *r);
void rec_free_thread(struct rec_thread *r);
void rec_free_thread_name(struct rec_thread_name *r);
void rec_free_code(struct rec_code *r);
void rec_free_stack(struct rec_stack *r);
void rec_free_module(struct rec_module *r);
void rec_free_note(struct rec_note *r);
void rec_free_event_desc(struct rec_event_desc *r);
void rec_free_jit_image(struct rec_jit_image *r);

#endif

/*
 * inject.c — see inject.h.
 *
 * The safe point. Loading a library runs the dynamic loader (its lock),
 * the C library's allocator (its arena locks) and, in the agent's setup,
 * plain system calls. A thread borrowed while it is inside one of those,
 * holding a lock, would wait for itself forever. So a thread is only
 * borrowed when:
 *   - it is blocked in a system call that waits for something outside
 *     (futex, poll, select, epoll, read, nanosleep ... the list below), or
 *     it was stopped while running code that is neither the C library nor
 *     the loader (the interpreter, an extension, JIT code);
 *   - and none of its frames is inside the loader or inside one of the C
 *     library's functions that hold such locks (the allocator, dlopen and
 *     friends, fork, exit, the stdio reads that hold a FILE lock while they
 *     block). The frames are the thread's real call chain, unwound with
 *     the objects' DWARF CFI (stack-native.c, as `strata stack --native`):
 *     the stack also holds words that are not frames (a return address a
 *     finished call left in a slot a later frame reserved but never
 *     wrote, the auxiliary vector, pointers into a library's data), and
 *     such a stale word must not refuse a thread forever (issue 21). Where
 *     the walk cannot go on (code with no CFI: JIT code, hand-written
 *     assembly; a rule it cannot evaluate; a corrupt stack), every word of
 *     the part of the stack it did not account for, from that frame up, is
 *     taken as a possible frame, as before: that part can only make a
 *     thread be refused, and the message says so.
 * Other threads are let go before the call: a lock one of them holds is
 * released as it runs, and the call waits like any caller.
 *
 * The call. The thread's registers, its vector state (XSAVE area) and the
 * 256 KiB of stack below its stack pointer are saved; the call runs on
 * that stack below the red zone with a return address of 0, so its return
 * is a fault at address 0 that strata, as the tracer, takes and discards.
 * Signals that arrive during the call are delivered to the thread (its
 * handlers run on top of the call, as on top of any code). Then errno,
 * the stack bytes, the registers and the vector state are put back and the
 * thread is let go; if it was in a system call, the kernel restarts it
 * exactly as after any stop (the system call number is restored with the
 * registers).
 */
#include "inject.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/elfsect.h"
#include "ptstop.h"
#include "pyproc.h"
#include "rexec.h"
#include "stack-native.h"

/* How long a 3.14+ process has to run bytecode and take the PEP 768
 * request before ptrace is tried instead. */
#define PEP768_TIMEOUT_MS 2000

#if !defined(__x86_64__)
int inject_agent(pid_t pid, const char *agent_dir, const char *options, int timeout_ms, struct inject_stats *st,
		 char *err, size_t errlen)
{
	(void)agent_dir;
	(void)options;
	(void)timeout_ms;
	(void)st;
	snprintf(err, errlen, "cannot load the agent into process %d: attaching is implemented for x86-64 only",
		 (int)pid);
	return -1;
}
#else

#define STACK_READ (8u << 20)  /* stack copied per thread and check, at most */
#define STACK_SAVE (256u << 10)
#define MAX_STEPS 65536          /* frames walked per thread */
#define MAX_RANGES 128

struct range {
	uint64_t lo, hi;
};

/* Why a thread is not at a safe point; formatted only for the message. */
enum verdict_kind {
	V_SAFE,
	V_SIGNAL,     /* stopped by job control or receiving a signal */
	V_SYSCALL,    /* in a system call that may hold a lock (pc: where) */
	V_RESTART,    /* in a relative sleep (pc: where) */
	V_RUNNING,    /* running inside the C library or the loader (pc) */
	V_NOSTACK,    /* its stack pointer is in no mapping */
	V_SMALL,      /* too little stack left below its stack pointer */
	V_UNREADABLE, /* its stack could not be read */
	V_FRAME,      /* a frame (pc, exact or a return address) inside a lock holder; caller: the frame it returns to */
	V_WORD,       /* the walk stopped at pc (stop: why); a word above it (word) points into a lock holder */
};

struct verdict {
	int kind;
	pid_t tid;
	long nr;            /* V_SYSCALL: the system call */
	uint64_t pc;        /* V_FRAME: the frame; V_WORD: where the walk stopped; else the thread's pc */
	int exact;          /* pc is not a return address */
	uint64_t caller;    /* V_FRAME: the frame's caller (0: none known) */
	const char *holder; /* V_FRAME, V_WORD: the C library's function it is in, or NULL (the loader) */
	uint64_t word;      /* V_WORD: the word */
	int stop;           /* V_WORD: SN_* */
};

struct inj {
	struct pyproc p;
	uint64_t dlopen_fn, dlerror_fn, errno_fn;
	struct range forbid[MAX_RANGES]; /* return addresses that mean "holds a loader or allocator lock" */
	const char *forbid_name[MAX_RANGES]; /* the C library's function, or NULL (the loader) */
	int nforbid;
	char libc[4096];                  /* the C library's path */
	struct range noip[16];            /* code a stopped thread must not be running */
	int nnoip;
	const char *options;              /* strata_agent_load's options */
	struct stack_native *sn;          /* the process's objects and their CFI, for the walks */
	struct snstep *steps;             /* MAX_STEPS */
	uint64_t *stack;                  /* STACK_READ */
};

/* Blocking waits for something outside: a thread in one of these holds no
 * lock of the allocator or the loader (checked on its frames as well).
 * And sched_yield, which waits for nothing: a spin-wait's yield (OpenBLAS's
 * threads, and a NumPy program's main thread waiting for them, spend their
 * time there), as safe as the code around it, whose frames are checked. */
static int waiting_syscall(long nr)
{
	switch (nr) {
	case SYS_read:
	case SYS_poll:
	case SYS_select:
	case SYS_pause:
	case SYS_nanosleep:
	case SYS_accept:
	case SYS_recvfrom:
	case SYS_recvmsg:
	case SYS_wait4:
	case SYS_rt_sigtimedwait:
	case SYS_rt_sigsuspend:
	case SYS_futex:
	case SYS_clock_nanosleep:
	case SYS_epoll_wait:
	case SYS_pselect6:
	case SYS_ppoll:
	case SYS_epoll_pwait:
	case SYS_accept4:
	case 441: /* epoll_pwait2 */
	case SYS_sched_yield:
		return 1;
	}
	return 0;
}

static const char *const lock_holders[] = {
	"malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign", "aligned_alloc",
	"valloc", "pvalloc", "malloc_trim", "malloc_usable_size", "mallinfo", "mallinfo2", "malloc_stats",
	"malloc_info", "mallopt", "dlopen", "dlmopen", "dlclose", "dlsym", "dlvsym", "dladdr", "dladdr1",
	"dlinfo", "dl_iterate_phdr", "__libc_dlopen_mode", "__libc_dlsym", "__libc_dlclose", "fork", "_Fork",
	"exit", "pthread_create", "fgets", "fgetc", "getc", "fread", "getline", "getdelim", "fscanf", "scanf",
	"getchar", "fflush", "fclose", "fopen", "fdopen", "freopen", "setenv", "putenv", "unsetenv", NULL,
};

struct scan_maps {
	struct inj *in;
	char libc[4096], libc_file[4400];
	uint64_t stack_rsp;
	struct pmap stack;
	int found_stack;
};

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? s + 1 : p;
}

static int collect(const struct pmap *m, void *data)
{
	struct scan_maps *sm = data;
	struct inj *in = sm->in;
	if (m->perms[2] != 'x')
		return 0;
	const char *b = base_name(m->path);
	int ld = !strncmp(b, "ld-linux", 8) || !strncmp(b, "ld-2.", 5);
	if (ld && in->nforbid < MAX_RANGES)
		in->forbid[in->nforbid++] = (struct range){ m->start, m->end };
	if ((ld || !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-2.", 7) || !strcmp(m->path, "[vdso]")) &&
	    in->nnoip < 16)
		in->noip[in->nnoip++] = (struct range){ m->start, m->end };
	return 0;
}

static int find_stack(const struct pmap *m, void *data)
{
	struct scan_maps *sm = data;
	if (sm->stack_rsp >= m->start && sm->stack_rsp < m->end) {
		sm->stack = *m;
		sm->found_stack = 1;
		return 1;
	}
	return 0;
}

static int in_ranges(const struct range *r, int n, uint64_t a)
{
	for (int i = 0; i < n; i++)
		if (a >= r[i].lo && a < r[i].hi)
			return 1;
	return 0;
}

/* Index of the forbidden range holding a, or -1. */
static int forbidden(const struct inj *in, uint64_t a)
{
	for (int i = 0; i < in->nforbid; i++)
		if (a >= in->forbid[i].lo && a < in->forbid[i].hi)
			return i;
	return -1;
}

/* Where the functions the call needs are, and what a safe point must not
 * be inside. */
static int prepare(struct inj *in, char *err, size_t errlen)
{
	struct scan_maps sm;
	memset(&sm, 0, sizeof(sm));
	sm.in = in;
	pyproc_maps(in->p.pid, collect, &sm);
	uint64_t bias;
	if (pyproc_object(in->p.pid, "/libc.so.6", sm.libc, sizeof(sm.libc), sm.libc_file, sizeof(sm.libc_file),
			  &bias)) {
		snprintf(err, errlen, "cannot load the agent into process %d: it has no GNU C library (libc.so.6) "
			 "mapped", (int)in->p.pid);
		return -1;
	}
	uint64_t a;
	/* glibc 2.34+ has dlopen in libc itself; before, its private
	 * __libc_dlopen_mode does the same for our purpose. */
	if ((a = elf_symbol(sm.libc_file, "dlopen", NULL)) != 0)
		in->dlopen_fn = a + bias;
	else if ((a = elf_symbol(sm.libc_file, "__libc_dlopen_mode", NULL)) != 0)
		in->dlopen_fn = a + bias;
	if ((a = elf_symbol(sm.libc_file, "dlerror", NULL)) != 0)
		in->dlerror_fn = a + bias;
	if ((a = elf_symbol(sm.libc_file, "__errno_location", NULL)) != 0)
		in->errno_fn = a + bias;
	if (!in->dlopen_fn || !in->errno_fn) {
		snprintf(err, errlen, "cannot load the agent into process %d: its C library (%s) has no dlopen",
			 (int)in->p.pid, sm.libc);
		return -1;
	}
	for (int i = 0; lock_holders[i] && in->nforbid < MAX_RANGES; i++) {
		uint64_t size = 0;
		a = elf_symbol(sm.libc_file, lock_holders[i], &size);
		if (a) {
			in->forbid_name[in->nforbid] = lock_holders[i];
			in->forbid[in->nforbid++] = (struct range){ a + bias, a + bias + (size ? size : 1) };
		}
	}
	snprintf(in->libc, sizeof(in->libc), "%s", sm.libc);
	return 0;
}

/* The first word of w[0..n) that points into a lock holder (its range in
 * *k), or 0. */
static uint64_t forbidden_word(struct inj *in, const uint64_t *w, size_t n, int *k)
{
	for (size_t i = 0; i < n; i++)
		if ((*k = forbidden(in, w[i])) >= 0)
			return w[i];
	return 0;
}

/* Whether thread t, stopped, is at a safe point; if not, *v says why
 * (for the message when none is found). */
static int safe_point(struct inj *in, struct ptthread *t, struct verdict *v)
{
	const struct user_regs_struct *r = &t->regs;
	memset(v, 0, sizeof(*v));
	v->tid = t->tid;
	v->pc = r->rip;
	v->exact = 1;
	if (!t->stopped || !t->have_regs || t->group_stop || t->pending_sig) {
		v->kind = V_SIGNAL;
		return 0;
	}
	long nr = (long)r->orig_rax, ret = (long)r->rax;
	if (nr >= 0) {
		if (!waiting_syscall(nr)) {
			v->kind = V_SYSCALL;
			v->nr = nr;
			return 0;
		}
		/* A relative sleep restarts through the thread's restart block,
		 * which a call of ours could overwrite. */
		if (ret == -516 /* ERESTART_RESTARTBLOCK */) {
			v->kind = V_RESTART;
			return 0;
		}
	} else if (in_ranges(in->noip, in->nnoip, r->rip)) {
		v->kind = V_RUNNING;
		return 0;
	}
	struct scan_maps sm;
	memset(&sm, 0, sizeof(sm));
	sm.stack_rsp = r->rsp;
	pyproc_maps(in->p.pid, find_stack, &sm);
	if (!sm.found_stack) {
		v->kind = V_NOSTACK;
		return 0;
	}
	/* Room for the loader below the stack pointer (the main stack grows). */
	if (r->rsp - sm.stack.start < STACK_SAVE && strcmp(sm.stack.path, "[stack]")) {
		v->kind = V_SMALL;
		return 0;
	}
	/* The stack in use, copied once: the walk and the fallback read it. */
	uint64_t lo = r->rsp & ~(uint64_t)7, hi = sm.stack.end;
	if (hi - lo > STACK_READ)
		hi = lo + STACK_READ;
	size_t n = (size_t)(hi - lo);
	if (pyproc_read(&in->p, in->stack, lo, n)) {
		v->kind = V_UNREADABLE;
		return 0;
	}
	stack_native_set_stack(in->sn, lo, in->stack, n);
	int stop = SN_MAX;
	int ns = stack_native_walk(in->sn, r, in->steps, MAX_STEPS, &stop);
	stack_native_set_stack(in->sn, 0, NULL, 0);
	/* The real frames: the leaf's pc, and each caller's return address
	 * (pc - 1 is its call instruction, which may be the last byte of a
	 * function whose next one starts at pc). */
	for (int i = 0; i < ns; i++) {
		uint64_t pc = in->steps[i].pc;
		int k = forbidden(in, in->steps[i].exact ? pc : pc - 1);
		if (k >= 0) {
			v->kind = V_FRAME;
			v->holder = in->forbid_name[k];
			v->pc = pc;
			v->exact = in->steps[i].exact;
			v->caller = i + 1 < ns ? in->steps[i + 1].pc : 0;
			return 0;
		}
	}
	/* The part of the stack the walk could not account for: any word
	 * there may be a frame's return address. */
	if (stop != SN_COMPLETE && ns > 0) {
		uint64_t from = in->steps[ns - 1].sp & ~(uint64_t)7;
		if (from < lo || from >= hi) {
			/* On another stack than the one copied (the walk left a
			 * signal handler's alternate stack): that one, from
			 * there up. */
			memset(&sm, 0, sizeof(sm));
			sm.stack_rsp = from;
			pyproc_maps(in->p.pid, find_stack, &sm);
			lo = from;
			hi = sm.found_stack ? sm.stack.end : from;
			if (hi - lo > STACK_READ)
				hi = lo + STACK_READ;
			if (hi <= lo || pyproc_read(&in->p, in->stack, lo, (size_t)(hi - lo))) {
				v->kind = V_UNREADABLE;
				return 0;
			}
		}
		int k = -1;
		uint64_t w = forbidden_word(in, in->stack + (from - lo) / 8, (size_t)(hi - from) / 8, &k);
		if (w) {
			v->kind = V_WORD;
			v->holder = in->forbid_name[k];
			v->pc = in->steps[ns - 1].pc;
			v->exact = in->steps[ns - 1].exact;
			v->stop = stop;
			v->word = w;
			return 0;
		}
	}
	return 1;
}

/* "malloc (libc.so.6)", "libfoo.so+0x1234", "0x7f..." for pc. */
static void name_pc(struct inj *in, uint64_t pc, int call, char *out, size_t n)
{
	const char *fn = NULL, *mod = NULL;
	stack_native_name(in->sn, pc, call, &fn, &mod);
	if (fn && mod)
		snprintf(out, n, "%s (%s)", fn, base_name(mod));
	else if (fn)
		snprintf(out, n, "%s", fn);
	else if (mod)
		snprintf(out, n, "%s at %#llx", base_name(mod), (unsigned long long)pc);
	else
		snprintf(out, n, "%#llx (in no object file)", (unsigned long long)pc);
}

static const char *syscall_name(long nr)
{
	switch (nr) {
	case SYS_flock: return "flock";
	case SYS_fcntl: return "fcntl";
	case SYS_write: return "write";
	case SYS_openat: return "openat";
	case SYS_open: return "open";
	case SYS_close: return "close";
	case SYS_mmap: return "mmap";
	case SYS_munmap: return "munmap";
	case SYS_msync: return "msync";
	case SYS_fsync: return "fsync";
	case SYS_brk: return "brk";
	case SYS_mprotect: return "mprotect";
	case SYS_madvise: return "madvise";
	case SYS_connect: return "connect";
	case SYS_sendto: return "sendto";
	case SYS_sendmsg: return "sendmsg";
	case SYS_waitid: return "waitid";
	case SYS_ioctl: return "ioctl";
	}
	return NULL;
}

/* The verdict as a phrase ("thread 1234 is inside malloc (libc.so.6), ...")
 * and what to try, for the message. */
static void describe(struct inj *in, const struct verdict *v, char *out, size_t n, char *hint, size_t hn)
{
	char a[256], b[256];
	name_pc(in, v->pc, !v->exact, a, sizeof(a));
	snprintf(hint, hn, "try again");
	switch (v->kind) {
	case V_SIGNAL:
		snprintf(out, n, "thread %d is stopped by job control or receiving a signal", (int)v->tid);
		break;
	case V_SYSCALL: {
		const char *sc = syscall_name(v->nr);
		char nm[32];
		if (!sc) {
			snprintf(nm, sizeof(nm), "number %ld", v->nr);
			sc = nm;
		}
		snprintf(out, n, "thread %d is in the system call %s, at %s: one strata does not borrow a thread in "
			 "(it may hold a lock)", (int)v->tid, sc, a);
		snprintf(hint, hn, "try again once it has returned");
		break;
	}
	case V_RESTART:
		snprintf(out, n, "thread %d is in a relative sleep (in %s), whose restart a call could overwrite",
			 (int)v->tid, a);
		snprintf(hint, hn, "try again once it has woken");
		break;
	case V_RUNNING:
		snprintf(out, n, "thread %d is running inside %s", (int)v->tid, a);
		break;
	case V_NOSTACK:
		snprintf(out, n, "thread %d's stack pointer is in no mapping", (int)v->tid);
		break;
	case V_SMALL:
		snprintf(out, n, "thread %d has too little stack left for the load", (int)v->tid);
		break;
	case V_UNREADABLE:
		snprintf(out, n, "thread %d's stack could not be read", (int)v->tid);
		break;
	case V_FRAME:
		if (v->holder)
			snprintf(a, sizeof(a), "%s (%.200s)", v->holder, base_name(in->libc));
		if (v->caller) {
			name_pc(in, v->caller, 1, b, sizeof(b));
			snprintf(out, n, "thread %d is inside %s, called from %s", (int)v->tid, a, b);
		} else {
			snprintf(out, n, "thread %d is inside %s", (int)v->tid, a);
		}
		snprintf(hint, hn, "try again; if it stays there, it may be stuck holding that lock (strata stack "
			 "--native %d shows where)", (int)in->p.pid);
		break;
	case V_WORD: {
		static const char *const why[] = {
			[SN_NO_CFI] = "no unwind information", [SN_UNREADABLE] = "a saved register could not be read",
			[SN_UNSUPPORTED] = "an unwind rule strata cannot evaluate",
			[SN_NOT_OUTWARD] = "a bad unwind rule or a corrupt stack",
			[SN_DEFERRED] = "its unwind table was not read yet", [SN_MAX] = "too many frames",
		};
		if (v->holder)
			snprintf(b, sizeof(b), "%s (%.200s)", v->holder, base_name(in->libc));
		else
			name_pc(in, v->word, 1, b, sizeof(b));
		snprintf(out, n, "thread %d's stack could not be unwound past %s (%s), and a word above it points into "
			 "%s, which may be a frame holding a lock", (int)v->tid, a,
			 v->stop > 0 && v->stop <= SN_MAX ? why[v->stop] : "?", b);
		snprintf(hint, hn, "try again when the thread is elsewhere (in Python code, or waiting)");
		break;
	}
	default:
		snprintf(out, n, "thread %d", (int)v->tid);
	}
}

static void inj_free(struct inj *in)
{
	stack_native_free(in->sn);
	free(in->steps);
	free(in->stack);
	pyproc_close(&in->p);
}

static double ms_since(uint64_t t0) { return (double)(ptstop_now_ns() - t0) / 1e6; }

/* Runs fn(a0, a1, a2) on the borrowed thread, stopped, with the stack
 * pointer sp (the return address slot). 0 and the result in *ret; -1 with
 * err if it could not be started, or -2 if the process died during it. */
static int rcall(struct inj *in, pid_t tid, const struct user_regs_struct *base, uint64_t sp, uint64_t fn,
		 uint64_t a0, uint64_t a1, uint64_t a2, uint64_t *ret, char *err, size_t errlen)
{
	struct user_regs_struct r = *base;
	r.rip = fn;
	r.rsp = sp;
	r.rdi = a0;
	r.rsi = a1;
	r.rdx = a2;
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1; /* not in a system call: no restart */
	r.eflags &= ~0x400ull;                /* the ABI's clear direction flag */
	uint64_t zero = 0;
	if (pyproc_write(&in->p, sp, &zero, sizeof(zero)) || ptrace(PTRACE_SETREGS, tid, 0, &r) ||
	    ptrace(PTRACE_CONT, tid, 0, 0)) {
		snprintf(err, errlen, "cannot set up the call in thread %d: %s", (int)tid, strerror(errno));
		return -1;
	}
	uint64_t t0 = ptstop_now_ns();
	int warned = 0;
	for (;;) {
		int st;
		pid_t w = waitpid(tid, &st, __WALL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
			snprintf(err, errlen, "process %d ended during the load", (int)in->p.pid);
			return -2;
		}
		if (!WIFSTOPPED(st))
			continue;
		int sig = WSTOPSIG(st);
		if ((st >> 16) == PTRACE_EVENT_STOP) {
			/* Job control stopped the process: stay stopped with it. */
			if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
				ptrace(PTRACE_LISTEN, tid, 0, 0);
			else
				ptrace(PTRACE_CONT, tid, 0, 0);
			continue;
		}
		if (sig == SIGSEGV) {
			struct user_regs_struct after;
			if (ptrace(PTRACE_GETREGS, tid, 0, &after)) {
				snprintf(err, errlen, "lost thread %d during the load", (int)tid);
				return -1;
			}
			/* Our return: a jump to 0 by the `ret` that popped the
			 * slot at sp. */
			if (after.rip == 0 && after.rsp == sp + 8) {
				*ret = after.rax;
				return 0;
			}
			/* Any other fault is the program's (or a library's) to
			 * handle: the call cannot be undone halfway (the loader
			 * may hold its lock), so it is delivered as it would be
			 * without strata. */
		}
		/* A signal for the thread: delivered, its handler runs on
		 * top of the call. */
		ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);
		if (!warned && ms_since(t0) > 10000) {
			fprintf(stderr, "strata: still waiting for the agent to load in thread %d of process %d\n",
				(int)tid, (int)in->p.pid);
			warned = 1;
		}
	}
}

/* Reads a NUL-terminated string of the target. */
static void read_cstr(struct inj *in, uint64_t addr, char *out, size_t n)
{
	out[0] = 0;
	for (size_t i = 0; addr && i + 1 < n; i++) {
		if (pyproc_read(&in->p, &out[i], addr + i, 1) || !out[i]) {
			out[i] = 0;
			return;
		}
		out[i + 1] = 0;
	}
}

/* The calls, on borrowed thread t (stopped, registers in t->regs). */
static int borrow(struct inj *in, struct ptthread *t, const char *agent, struct inject_stats *st, char *err,
		  size_t errlen)
{
	pid_t tid = t->tid;
	const struct user_regs_struct orig = t->regs;
	uint8_t xsave[16384];
	struct iovec xv = { xsave, sizeof(xsave) };
	int have_x = ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &xv) == 0;
	struct user_fpregs_struct fp;
	int have_fp = !have_x && ptrace(PTRACE_GETFPREGS, tid, 0, &fp) == 0;
	if (!have_x && !have_fp) {
		snprintf(err, errlen, "cannot read the vector registers of thread %d: %s", (int)tid, strerror(errno));
		ptstop_release_one(t);
		return -1;
	}
	/* The stack below the red zone: saved, used, put back. */
	uint64_t top = (orig.rsp - 256) & ~(uint64_t)15;
	uint64_t save_lo = orig.rsp - STACK_SAVE;
	struct scan_maps sm;
	memset(&sm, 0, sizeof(sm));
	sm.stack_rsp = orig.rsp;
	pyproc_maps(in->p.pid, find_stack, &sm);
	if (sm.found_stack && save_lo < sm.stack.start)
		save_lo = sm.stack.start;
	size_t save_n = (size_t)(orig.rsp - save_lo);
	uint8_t *saved = malloc(save_n);
	if (!saved || pyproc_read(&in->p, saved, save_lo, save_n)) {
		free(saved);
		snprintf(err, errlen, "cannot read the stack of thread %d", (int)tid);
		ptstop_release_one(t);
		return -1;
	}
	uint64_t data = top - 8192;          /* path, error buffer, options */
	uint64_t sp = ((data - 64) & ~(uint64_t)15) - 8; /* as after a call: rsp % 16 == 8 */
	uint64_t a_path = data, a_err = data + 4096, a_opts = data + 6144;
	char errbuf[1024] = "";
	int rc = -1, ended = 0;
	uint64_t ret = 0, errno_at = 0;
	int saved_errno = 0;
	uint64_t t0 = ptstop_now_ns();
	if (pyproc_write(&in->p, a_path, agent, strlen(agent) + 1) || pyproc_write(&in->p, a_opts, in->options, strlen(in->options) + 1) ||
	    pyproc_write(&in->p, a_err, "", 1)) {
		snprintf(err, errlen, "cannot write to the memory of process %d", (int)in->p.pid);
		goto restore;
	}
	int r = rcall(in, tid, &orig, sp, in->errno_fn, 0, 0, 0, &errno_at, err, errlen);
	if (r)
		goto fail;
	if (errno_at)
		pyproc_read(&in->p, &saved_errno, errno_at, sizeof(saved_errno));
	r = rcall(in, tid, &orig, sp, in->dlopen_fn, a_path, RTLD_NOW, 0, &ret, err, errlen);
	if (r)
		goto fail;
	if (!ret) {
		uint64_t msg = 0;
		if (in->dlerror_fn && rcall(in, tid, &orig, sp, in->dlerror_fn, 0, 0, 0, &msg, err, errlen) == 0)
			read_cstr(in, msg, errbuf, sizeof(errbuf));
		snprintf(err, errlen, "process %d could not load %s: %s", (int)in->p.pid, agent,
			 errbuf[0] ? errbuf : "dlopen failed");
		goto restore;
	}
	char apath[4096], afile[4400];
	uint64_t abias, aload;
	if (pyproc_object(in->p.pid, "/libstrata-agent.so", apath, sizeof(apath), afile, sizeof(afile), &abias) ||
	    !(aload = elf_symbol(afile, "strata_agent_load", NULL))) {
		snprintf(err, errlen, "the agent was loaded into process %d but its entry point was not found",
			 (int)in->p.pid);
		goto restore;
	}
	r = rcall(in, tid, &orig, sp, aload + abias, a_opts, a_err, sizeof(errbuf), &ret, err, errlen);
	if (r)
		goto fail;
	if ((int)ret != 0) {
		read_cstr(in, a_err, errbuf, sizeof(errbuf));
		snprintf(err, errlen, "the agent did not start in process %d: %s", (int)in->p.pid,
			 errbuf[0] ? errbuf : "no reason given");
		goto restore;
	}
	rc = 0;
	goto restore;
fail:
	if (r == -2)
		ended = 1;
restore:
	if (st)
		st->call_ms = ms_since(t0);
	if (!ended) {
		if (errno_at)
			pyproc_write(&in->p, errno_at, &saved_errno, sizeof(saved_errno));
		pyproc_write(&in->p, save_lo, saved, save_n);
		ptrace(PTRACE_SETREGS, tid, 0, &orig);
		if (have_x)
			ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &xv);
		else
			ptrace(PTRACE_SETFPREGS, tid, 0, &fp);
		ptrace(PTRACE_DETACH, tid, 0, 0);
	}
	free(saved);
	return rc;
}

int inject_agent(pid_t pid, const char *agent_dir, const char *options, int timeout_ms, struct inject_stats *st,
		 char *err, size_t errlen)
{
	struct inj in;
	memset(&in, 0, sizeof(in));
	in.options = options ? options : "";
	if (strlen(in.options) >= 2048) {
		snprintf(err, errlen, "the agent's options are too long (%zu bytes)", strlen(in.options));
		return -1;
	}
	if (st)
		memset(st, 0, sizeof(*st));
	/* A process caught just after its exec is waited for (the same
	 * time budget), else it would look like no Python at all. */
	double loader_ms = 0;
	if (pyproc_open(&in.p, pid, err, errlen) || pyproc_wait_loaded(&in.p, timeout_ms, &loader_ms, err, errlen) ||
	    pyproc_python(&in.p, agent_dir, err, errlen)) {
		pyproc_close(&in.p);
		return -1;
	}
	timeout_ms -= (int)loader_ms;
	if (timeout_ms < 500)
		timeout_ms = 500;
	char agent[4096], seen[4400];
	snprintf(agent, sizeof(agent), "%s/libstrata-agent.so", agent_dir);
	snprintf(seen, sizeof(seen), "/proc/%d/root%s", (int)pid, agent);
	if (access(agent, R_OK) || access(seen, R_OK)) {
		snprintf(err, errlen, "cannot load the agent into process %d: %s is not visible from it (another "
			 "mount namespace, a container?)", (int)pid, agent);
		pyproc_close(&in.p);
		return -1;
	}
	char state[64];
	if (proc_status_field(pid, "State:", state, sizeof(state))[0] == 'T') {
		snprintf(err, errlen, "process %d is stopped (job control: SIGSTOP or Ctrl-Z): continue it (kill -CONT %d) "
			 "and try again; nothing was changed in it", (int)pid, (int)pid);
		pyproc_close(&in.p);
		return -1;
	}
	unsigned vmaj = 0, vmin = 0;
	sscanf(in.p.version, "%u.%u", &vmaj, &vmin);
	if (vmaj == 3 && vmin >= 14) {
		double w = 0;
		int r = rexec_agent(&in.p, agent, in.options, PEP768_TIMEOUT_MS, &w, err, errlen);
		if (r <= 0) {
			if (st && r == 0) {
				st->how = INJECT_PEP768;
				st->wait_ms = loader_ms + w;
			}
			pyproc_close(&in.p);
			return r;
		}
		if (st)
			snprintf(st->not_pep768, sizeof(st->not_pep768), "%s", err);
		err[0] = 0;
	}
	if (prepare(&in, err, errlen)) {
		pyproc_close(&in.p);
		return -1;
	}
	/* The objects' unwind tables are compiled when a walk first needs
	 * them (the few objects on the stacks, not every one mapped), but for
	 * those on every Python thread's stack: now, not while it is paused. */
	in.sn = stack_native_open(&in.p, 0);
	if (in.sn) {
		stack_native_compile(in.sn, in.p.exe);
		stack_native_compile(in.sn, in.p.pyobj);
		stack_native_compile(in.sn, in.libc);
		stack_native_defer(in.sn, 1);
	}
	in.steps = malloc(MAX_STEPS * sizeof(*in.steps));
	in.stack = malloc(STACK_READ);
	if (!in.sn || !in.steps || !in.stack) {
		snprintf(err, errlen, "out of memory");
		inj_free(&in);
		return -1;
	}
	/* The call must not be cut short: between its start and the
	 * registers put back, the thread returns to address 0 and only we
	 * can take that fault. Terminal signals wait until it is over. */
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGTSTP);
	sigprocmask(SIG_BLOCK, &block, &old);
	uint64_t t0 = ptstop_now_ns();
	/* What the last pause saw: the main thread's verdict (else the first
	 * thread's), and how many other threads were not at a safe point. */
	struct verdict last = { .kind = -1 };
	int others = 0;
	int rc = -1, tries = 0;
	for (;;) {
		struct ptstop ps;
		tries++;
		if (ptstop_all(&ps, pid, 500, err, errlen))
			break;
		ptstop_regs(&ps);
		/* The main thread first: most often the one waiting. */
		struct ptthread *pick = NULL;
		int nseen = 0;
		for (int pass = 0; pass < 2 && !pick; pass++)
			for (int i = 0; i < ps.n && !pick; i++) {
				if ((pass == 0) != (ps.t[i].tid == pid))
					continue;
				struct verdict v;
				if (safe_point(&in, &ps.t[i], &v))
					pick = &ps.t[i];
				else if (!nseen++)
					last = v;
			}
		others = nseen - 1;
		if (pick) {
			struct ptthread chosen = *pick;
			pick->seized = 0; /* kept: not let go with the others */
			ptstop_release(&ps);
			if (st) {
				st->wait_ms = loader_ms + ms_since(t0);
				st->tries = tries;
				st->tid = chosen.tid;
			}
			rc = borrow(&in, &chosen, agent, st, err, errlen);
			break;
		}
		ptstop_release(&ps);
		/* A walk stopped at an object whose unwind table was not
		 * compiled yet: compiled now, the process running, and checked
		 * again at once. */
		if (stack_native_compile_wanted(in.sn) && ms_since(t0) <= timeout_ms)
			continue;
		if (ms_since(t0) > timeout_ms) {
			char what[1024], hint[256] = "try again";
			if (last.kind >= 0)
				describe(&in, &last, what, sizeof(what), hint, sizeof(hint));
			else
				snprintf(what, sizeof(what), "no thread could be paused");
			char more[64] = "";
			if (others > 0)
				snprintf(more, sizeof(more), " (and %d other thread%s not at one either)", others,
					 others > 1 ? "s" : "");
			snprintf(err, errlen,
				 "no thread of process %d reached a safe point to load the agent in %.1f s (%d tries); "
				 "last seen: %s%s; nothing was changed in it: %s",
				 (int)pid, timeout_ms / 1000.0, tries, what, more, hint);
			break;
		}
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	inj_free(&in);
	return rc;
}
#endif

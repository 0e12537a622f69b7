/*
 * signals.c — the agent's signal handlers and the interposed sigaction()
 * and signal().
 *
 * The agent owns three signals: SIGPROF (sampling) and SIGSEGV/SIGBUS (the
 * fault guard that lets the handler read possibly-stale interpreter
 * memory). The application may install its own handlers for them (Python's
 * faulthandler does for SIGSEGV, pytest enables it); instead of letting that
 * displace ours, the interposed sigaction() records the application's
 * handler and reports it back exactly as if it were installed, and our
 * handler forwards every signal that is not ours to it. A fault outside a
 * guarded read therefore reaches the application (or the default action)
 * unchanged.
 *
 * Nothing else is watched: a process killed by a signal (SIGTERM, SIGHUP,
 * SIGINT at their default action, SIGKILL) dies exactly as it would, and
 * its helper, seeing it gone, writes what the rings hold and ends the
 * stream (link.h). The program's own handlers for the other signals go
 * into the kernel with the program's own flags and mask, behind one
 * function of ours (on_program) that passes a signal sent to the process
 * on to the thread the kernel chose for it when our sampling made another
 * thread take it (handoff.c), and calls them otherwise.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "shm/agent.h"

int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static sighandler_t (*real_signal)(int, sighandler_t);

/* What the application believes is installed, for the signals we manage. */
static struct sigaction app_act[NSIG];
static volatile sig_atomic_t managed[NSIG];

/* The program's handlers of the other signals, in front of which the
 * kernel has on_program: what it calls (with three arguments whatever
 * SA_SIGINFO says, as the kernel does) and the program's flags. */
static volatile sig_atomic_t wrapped[NSIG];
static void *_Atomic app_fn[NSIG];
static _Atomic int app_flags[NSIG];
static int wrap_on;
static void on_program(int sig, siginfo_t *si, void *uc);

void signals_resolve(void)
{
	if (!real_sigaction)
		real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
	if (!real_signal)
		real_signal = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
}

/* Performs the default action of `sig` for a signal we received but the
 * application did not handle: give the disposition back to the kernel and
 * let the signal take effect. */
static void default_action(int sig, siginfo_t *si)
{
	struct sigaction d;
	memset(&d, 0, sizeof(d));
	d.sa_handler = SIG_DFL;
	sigemptyset(&d.sa_mask);
	managed[sig] = 0;
	real_sigaction(sig, &d, NULL);
	/* A hardware fault re-executes the faulting instruction when we
	 * return and then takes the default action; a sent signal has to be
	 * raised again. */
	int synchronous = (sig == SIGSEGV || sig == SIGBUS) && si && si->si_code > 0;
	if (!synchronous) {
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, sig);
		pthread_sigmask(SIG_UNBLOCK, &s, NULL);
		raise(sig);
	}
}

static void chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction a = app_act[sig];
	if (tls_slot)
		tls_slot->sig_app++;
	if (a.sa_flags & SA_SIGINFO) {
		if (a.sa_flags & SA_RESETHAND)
			app_act[sig].sa_handler = SIG_DFL, app_act[sig].sa_flags &= ~SA_SIGINFO;
		if (a.sa_sigaction)
			a.sa_sigaction(sig, si, uc);
		return;
	}
	if (a.sa_handler == SIG_IGN)
		return;
	if (a.sa_handler == SIG_DFL) {
		/* SIGPROF, SIGSEGV and SIGBUS all terminate by default. */
		default_action(sig, si);
		return;
	}
	if (a.sa_flags & SA_RESETHAND)
		app_act[sig].sa_handler = SIG_DFL;
	a.sa_handler(sig);
}

/*
 * The end of a sample. Every signal but the synchronous ones is blocked
 * while our SIGPROF handler runs, so a signal of the program that comes
 * meanwhile waits; rt_sigreturn then restores the interrupted code's mask
 * and the thread takes, on its way out, every pending signal that mask
 * lets through. Two things would then differ from a run without us:
 *
 * Which thread takes it. A signal sent to the process was meant for the
 * thread the kernel chose when it came (the main thread, in pause() or
 * sleep()), not for whichever busy thread happened to be sampled: so it is
 * left to that thread (handoff.c).
 *
 * What happens to the interrupted call. A system call our SIGPROF
 * interrupted was restarted (SA_RESTART): the kernel has put the
 * instruction pointer back on the `syscall` and the call's number back in
 * %rax. A program signal that this thread takes would, without the
 * profiler, have interrupted that call itself: if its handler has no
 * SA_RESTART (CPython's signal.signal, siginterrupt(sig, True)), the call
 * fails with EINTR, which is how a Python handler gets to run while the
 * main thread blocks in read(). Restarted under ours, the call would
 * block again. So when this thread takes such a signal, the call returns
 * EINTR as it would have: %rax = -EINTR, past the `syscall`. Only a call
 * that blocks, and that the thread executed, is touched (below).
 *
 * The common case costs one rt_sigpending: nothing of the program is
 * pending. Async-signal-safe.
 */
#define SIGBIT(sig) (1ull << ((sig) - 1))

/* The signals that are the program's: all but SIGKILL and SIGSTOP, and
 * but those the agent uses while the program has no handler of its own
 * for them (a SIGPROF pending for the next sample is ours). */
static uint64_t program_signals(void)
{
	uint64_t w = ~0ull & ~SIGBIT(SIGKILL) & ~SIGBIT(SIGSTOP);
	for (int sig = 1; sig < NSIG && sig <= 64; sig++)
		if (managed[sig] && !signals_app_handles(sig))
			w &= ~SIGBIT(sig);
	return w;
}

/* What the program reads back for sig, not managed: its own handler in
 * place of on_program, with the flags and mask the kernel has now (glibc's
 * own siginterrupt() changes them there, past us). Async-signal-safe. */
static int query(int sig, struct sigaction *out)
{
	struct sigaction k;
	if (real_sigaction(sig, NULL, &k) != 0)
		return -1;
	if ((k.sa_flags & SA_SIGINFO) && k.sa_sigaction == on_program) {
		k.sa_sigaction = (void (*)(int, siginfo_t *, void *))atomic_load(&app_fn[sig]);
		if (!(atomic_load(&app_flags[sig]) & SA_SIGINFO))
			k.sa_flags &= ~SA_SIGINFO;
	} else if (wrapped[sig]) {
		wrapped[sig] = 0; /* replaced past us (a raw system call) */
	}
	*out = k;
	return 0;
}

/* The program's disposition of sig (what it installed, for a managed one). */
static int program_action(int sig, struct sigaction *a)
{
	if (managed[sig]) {
		*a = app_act[sig];
		return 0;
	}
	return query(sig, a);
}

static int has_handler(const struct sigaction *a)
{
	return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction != NULL
					  : (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
}

#if defined(__x86_64__)
/* The system calls that can block, and so be interrupted and restarted
 * (-ERESTARTSYS and its kin). fork and clone restart whatever the
 * handler (ERESTARTNOINTR) and are not here. */
static int restartable(long nr)
{
	switch (nr) {
	case SYS_read: case SYS_write: case SYS_readv: case SYS_writev: case SYS_pread64: case SYS_pwrite64:
	case SYS_preadv: case SYS_pwritev: case 327 /* preadv2 */: case 328 /* pwritev2 */:
	case SYS_open: case SYS_openat: case 437 /* openat2 */: case SYS_ioctl: case SYS_fcntl: case SYS_flock:
	case SYS_connect: case SYS_accept: case SYS_accept4: case SYS_sendto: case SYS_recvfrom: case SYS_sendmsg:
	case SYS_recvmsg: case SYS_sendmmsg: case SYS_recvmmsg: case SYS_wait4: case SYS_waitid:
	case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_restart_syscall: case SYS_select: case SYS_pselect6:
	case SYS_poll: case SYS_ppoll: case SYS_epoll_wait: case SYS_epoll_pwait: case 441 /* epoll_pwait2 */:
	case SYS_futex: case 449 /* futex_waitv */: case SYS_rt_sigsuspend: case SYS_pause: case SYS_rt_sigtimedwait:
	case SYS_msgrcv: case SYS_msgsnd: case SYS_semop: case SYS_semtimedop: case SYS_mq_timedsend:
	case SYS_mq_timedreceive: case SYS_io_getevents: case 333 /* io_pgetevents */: case SYS_splice: case SYS_tee:
	case SYS_sendfile: case 318 /* getrandom */: case 426 /* io_uring_enter */:
		return 1;
	default:
		return 0;
	}
}

/* Those a handler cuts short whatever its SA_RESTART (signal(7)). */
static int always_interrupted(long nr)
{
	switch (nr) {
	case SYS_pause: case SYS_rt_sigsuspend: case SYS_rt_sigtimedwait: case SYS_nanosleep: case SYS_clock_nanosleep:
	case SYS_restart_syscall: case SYS_select: case SYS_pselect6: case SYS_poll: case SYS_ppoll:
	case SYS_epoll_wait: case SYS_epoll_pwait: case 441 /* epoll_pwait2 */:
		return 1;
	default:
		return 0;
	}
}
#endif

/* The interrupted call returns EINTR, if it is one the kernel restarted
 * and a handler with the flag `sa_restart` would have cut it short. */
static void keep_interruption(ucontext_t *uc, int sa_restart)
{
#if defined(__x86_64__)
	greg_t *g = uc->uc_mcontext.gregs;
	const volatile uint8_t *ip = (const volatile uint8_t *)(uintptr_t)g[REG_RIP];
	long nr = (long)g[REG_RAX];
	/* A `syscall` the thread has not executed yet looks much the same:
	 * the number loaded, the instruction next. Skipping such a call
	 * would fail one that cannot fail (getppid), or step past
	 * rt_sigreturn into whatever follows it. So only a call the kernel
	 * can restart is touched (one that blocks: for it, EINTR before any
	 * work is a result it may give anyway), and only when %rcx holds
	 * the address past the instruction, as the instruction leaves it and
	 * the kernel's rewind keeps it (a call not executed has it only if
	 * the last call was made by the same instruction). */
	if (!ip || (uint64_t)g[REG_RCX] != (uint64_t)g[REG_RIP] + 2 || ip[0] != 0x0f || ip[1] != 0x05 ||
	    !restartable(nr) || (sa_restart && !always_interrupted(nr)))
		return;
	g[REG_RAX] = -EINTR;
	g[REG_RIP] += 2;
#else
	(void)uc;
	(void)sa_restart;
#endif
}

uint64_t signals_handled(uint64_t sigs, uint64_t *interrupting)
{
	uint64_t handled = 0, intr = 0;
	if (sigs)
		sigs &= program_signals();
	/* A signal the program ignores, or leaves at a default action (the
	 * kernel ends or stops the whole process for it, or discards it),
	 * cuts no call short and runs nothing: whoever takes it. */
	for (int sig = 1; sigs && sig < NSIG && sig <= 64; sig++) {
		struct sigaction a;
		if (!(sigs & SIGBIT(sig)))
			continue;
		sigs &= ~SIGBIT(sig);
		if (program_action(sig, &a) != 0 || !has_handler(&a))
			continue;
		handled |= SIGBIT(sig);
		if (!(a.sa_flags & SA_RESTART))
			intr |= SIGBIT(sig);
	}
	if (interrupting)
		*interrupting = intr;
	return handled;
}

static void after_sample(ucontext_t *uc)
{
	sigset_t pend;
	if (sigpending(&pend) != 0)
		return;
	uint64_t interrupting, sigs = (uint64_t)pend.__val[0] & ~(uint64_t)uc->uc_sigmask.__val[0];
	if (!sigs || !(sigs = signals_handled(sigs, &interrupting)))
		return;
	if (handoff_settle(sigs) & interrupting)
		keep_interruption(uc, 0);
}

static void on_prof(int sig, siginfo_t *si, void *uc)
{
	struct tslot *s = tls_slot;
	if (s) {
		s->prof_mask = (uint64_t)((ucontext_t *)uc)->uc_sigmask.__val[0];
		s->in_prof = 1;
	}
	if (!sample_signal_dispatch(sig, si, uc)) {
		if (s)
			s->in_prof = 0;
		chain(sig, si, uc);
		return;
	}
	if (tls_slot)
		tls_slot->sig_ours++;
	int e = errno;
	after_sample(uc);
	errno = e;
	if (s)
		s->in_prof = 0;
}

/*
 * In front of every handler of the program (for the signals not managed
 * above). A signal sent to the process that a thread took only because
 * our sampling put it in the kernel's signal path (the end of a sample,
 * the kernel passing a pending signal on when our handler blocks it:
 * handoff.c) is passed on to the thread the kernel chose, with its
 * siginfo; anything else runs the program's handler here, as it would.
 */
static void on_program(int sig, siginfo_t *si, void *uc)
{
	int e = errno;
	int flags = atomic_load_explicit(&app_flags[sig], memory_order_relaxed);
	/* A handler that the kernel reset on delivery (SA_RESETHAND) is not
	 * there any more for a signal passed on. */
	if (!(flags & SA_RESETHAND) && handoff_reroute(sig, si)) {
		errno = e;
		return;
	}
	if (tls_slot)
		tls_slot->sig_app++;
	siginfo_t orig, *given = si;
	si = handoff_original(sig, si, &orig);
	if (si != given && uc) {
		/* Passed on to us: woken when it came, we found it taken and
		 * the kernel restarted our call, which this signal would have
		 * cut short. If it comes as we are back in user space, about
		 * to enter the call again, the call returns EINTR as then. */
		struct sigaction a;
		keep_interruption(uc, query(sig, &a) == 0 ? (a.sa_flags & SA_RESTART) != 0 : 0);
	}
	void *fn = atomic_load_explicit(&app_fn[sig], memory_order_relaxed);
	if (flags & SA_RESETHAND) {
		/* The kernel has SIG_DFL now: so do we. */
		wrapped[sig] = 0;
		atomic_store(&app_fn[sig], (void *)SIG_DFL);
	}
	errno = e;
	if (fn == (void *)SIG_IGN)
		return;
	if (fn == (void *)SIG_DFL) {
		/* Set so an instant ago, on its way in. */
		struct sigaction d;
		memset(&d, 0, sizeof(d));
		d.sa_handler = SIG_DFL;
		real_sigaction(sig, &d, NULL);
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, sig);
		pthread_sigmask(SIG_UNBLOCK, &one, NULL);
		raise(sig);
		return;
	}
	((void (*)(int, siginfo_t *, void *))fn)(sig, si, uc);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	struct tslot *s = tls_slot;
	if (s && s->guard_on) {
		/* A guarded read hit unmapped memory: abandon the read. */
		s->guard_on = 0;
		siglongjmp(s->guard_jb, 1);
	}
	chain(sig, si, uc);
}

void signals_all_but_faults(sigset_t *set)
{
	/* Faults stay deliverable: the guard needs SIGSEGV and SIGBUS, and a
	 * blocked synchronous signal would kill the process. */
	sigfillset(set);
	static const int sync_sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS };
	for (unsigned i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		sigdelset(set, sync_sigs[i]);
}

static int install_ours(int sig, void (*fn)(int, siginfo_t *, void *), int flags)
{
	struct sigaction ours;
	memset(&ours, 0, sizeof(ours));
	ours.sa_sigaction = fn;
	ours.sa_flags = SA_SIGINFO | flags;
	sigemptyset(&ours.sa_mask);
	if (sig == SIGPROF) {
		/* The program's signals wait the few microseconds of a sample:
		 * one that comes meanwhile is then seen pending, and delivered
		 * as soon as we return (after_sample). */
		signals_all_but_faults(&ours.sa_mask);
	}
	return real_sigaction(sig, &ours, NULL);
}

static int install(int sig, void (*fn)(int, siginfo_t *, void *), int flags)
{
	if (real_sigaction(sig, NULL, &app_act[sig]) != 0)
		return -1;
	if (install_ours(sig, fn, flags) != 0)
		return -1;
	managed[sig] = 1;
	return 0;
}

/* Takes `sig` back when a direct sigaction (not interposed: the agent was
 * loaded with dlopen) replaced our handler, keeping the replacement as the
 * application's handler we chain to. Async-signal-safe. Returns 0 when
 * ours is in place. */
static int retake(int sig, void (*fn)(int, siginfo_t *, void *), int flags)
{
	struct sigaction cur;
	if (real_sigaction(sig, NULL, &cur) != 0)
		return -1;
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == fn)
		return 0;
	app_act[sig] = cur;
	return install_ours(sig, fn, flags);
}

int signals_guard_check(void)
{
	if (retake(SIGSEGV, on_fault, SA_NODEFER | SA_ONSTACK) || retake(SIGBUS, on_fault, SA_NODEFER | SA_ONSTACK))
		return -1;
	return 0;
}

/* Whether the application has a handler of its own for `sig` (one we
 * chain to). */
int signals_app_handles(int sig)
{
	if (sig <= 0 || sig >= NSIG || !managed[sig])
		return 0;
	const struct sigaction *a = &app_act[sig];
	if (a->sa_flags & SA_SIGINFO)
		return a->sa_sigaction != NULL;
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

void signals_retake_prof(void) { retake(SIGPROF, on_prof, SA_RESTART); }

int signals_install(void)
{
	signals_resolve();
	if (!real_sigaction)
		return -1;
	/* SA_NODEFER on the fault handler: siglongjmp skips sigreturn, so the
	 * signal must not stay blocked afterwards. SA_ONSTACK so that a stack
	 * overflow forwarded to the application's handler (faulthandler uses
	 * an alternate stack) still has a stack to run on. */
	if (install(SIGSEGV, on_fault, SA_NODEFER | SA_ONSTACK) ||
	    install(SIGBUS, on_fault, SA_NODEFER | SA_ONSTACK) ||
	    install(SIGPROF, on_prof, SA_RESTART))
		return -1;
	/* The handlers already in place go behind on_program too: with an
	 * agent loaded by dlopen (an attach) all of the program's are, and
	 * its later sigaction() calls are not ours to see (one that replaces
	 * on_program just takes it out of the way). */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction cur;
		if (managed[sig] || sig == SIGKILL || sig == SIGSTOP || real_sigaction(sig, NULL, &cur) != 0 ||
		    !has_handler(&cur) || ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_program))
			continue;
		struct sigaction k = cur;
		atomic_store(&app_fn[sig], (cur.sa_flags & SA_SIGINFO) ? (void *)cur.sa_sigaction : (void *)cur.sa_handler);
		atomic_store(&app_flags[sig], cur.sa_flags);
		k.sa_sigaction = on_program;
		k.sa_flags |= SA_SIGINFO;
		if (real_sigaction(sig, &k, NULL) == 0)
			wrapped[sig] = 1;
	}
	wrap_on = 1;
	return 0;
}

/* ---- interposed API ---------------------------------------------------- */

AGENT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	signals_resolve();
	if (sig > 0 && sig < NSIG && managed[sig]) {
		if (old)
			*old = app_act[sig];
		if (act)
			app_act[sig] = *act;
		return 0;
	}
	if (!real_sigaction) {
		errno = ENOSYS;
		return -1;
	}
	if (!wrap_on || sig <= 0 || sig >= NSIG || sig == SIGKILL || sig == SIGSTOP)
		return real_sigaction(sig, act, old);
	struct sigaction prev;
	if (query(sig, &prev) != 0)
		return real_sigaction(sig, act, old); /* its error (glibc's own signals) */
	if (act) {
		int handler = (act->sa_flags & SA_SIGINFO) ? act->sa_sigaction != NULL
							   : (act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN);
		if (handler) {
			struct sigaction k = *act;
			atomic_store(&app_fn[sig], (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction
										 : (void *)act->sa_handler);
			atomic_store(&app_flags[sig], act->sa_flags);
			k.sa_sigaction = on_program;
			k.sa_flags |= SA_SIGINFO;
			if (real_sigaction(sig, &k, NULL) != 0)
				return -1;
			wrapped[sig] = 1;
		} else {
			if (real_sigaction(sig, act, NULL) != 0)
				return -1;
			wrapped[sig] = 0;
		}
	}
	if (old)
		*old = prev;
	return 0;
}

AGENT_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	signals_resolve();
	if (sig > 0 && sig < NSIG && managed[sig]) {
		sighandler_t old = app_act[sig].sa_handler;
		struct sigaction a;
		memset(&a, 0, sizeof(a));
		a.sa_handler = h;
		a.sa_flags = SA_RESTART; /* glibc's signal() has BSD semantics */
		sigemptyset(&a.sa_mask);
		app_act[sig] = a;
		return old;
	}
	if (wrap_on && sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP && h != SIG_ERR) {
		/* glibc's signal(): BSD semantics, the signal blocked in its
		 * handler. */
		struct sigaction a, o;
		memset(&a, 0, sizeof(a));
		a.sa_handler = h;
		a.sa_flags = SA_RESTART;
		sigemptyset(&a.sa_mask);
		sigaddset(&a.sa_mask, sig);
		if (sigaction(sig, &a, &o) != 0)
			return SIG_ERR;
		return o.sa_handler;
	}
	if (!real_signal) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return real_signal(sig, h);
}

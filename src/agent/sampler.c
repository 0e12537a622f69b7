/*
 * sampler.c — the sample capture in the signal handler.
 *
 * SIGPROF reaches a thread from its trigger (triggers.c: a perf event's
 * overflow, or a POSIX CPU timer) or, in wall mode, from the helper's
 * sampler when the thread is running (wall.c; blocked threads are read
 * from outside and never signalled). The capture is async-signal-safe: it
 * reserves space in the thread's ring, walks the Python frames through the
 * per-version module under the fault guard, unwinds the native stack with
 * --native, reads the -e counters, and commits.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <link.h>

#include "shm/agent.h"
#include "shm/link.h"
#include "shm/objects.h"
#include "shm/shm.h"
#include "shm/unwind.h"
#include "common/format.h"

#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Names a sample without Python frames: the interpreter starting or
 * shutting down. "Uninitialized" after the interpreter has been seen
 * running means it has finished finalizing. */
static int seen_running;

static uint8_t phase_flag(void)
{
	switch (agent_py->phase()) {
	case STRATA_PHASE_RUNNING:
		seen_running = 1;
		return 0;
	case STRATA_PHASE_FINALIZING:
		return STACK_PY_SHUTDOWN;
	default:
		return seen_running ? STACK_PY_SHUTDOWN : STACK_PY_STARTUP;
	}
}

/* Captures one sample of the calling thread, whose slot is s, into its
 * ring. */
/* The agent's own code: an allocation sample's native stack starts in
 * it (objects-sample.c) and is shown from its caller on. */
static uint64_t self_lo, self_hi;

static int self_range(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	uint64_t me = (uint64_t)(uintptr_t)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && me >= lo && me < hi) {
			self_lo = lo;
			self_hi = hi;
			return 1;
		}
	}
	return 0;
}

/* Captures one sample of the calling thread, whose slot is s, into its
 * ring; returns 0, or -1 if the ring was full. `alloc`: an allocation
 * sample (objects-sample.c), whose AW_N words ride where counters do. */
static int capture(struct tslot *s, const void *uc, uint32_t weight, const uint64_t *counters, uint32_t ncounters,
		   const uint64_t *alloc)
{
	if (alloc) {
		counters = alloc;
		ncounters = AW_N;
	}
	unsigned depth = agent.cfg.max_depth;
	/* Without --native, a thread in JIT code still records where: the
	 * JIT function is the leaf of its Python caller's stack. */
	const int jit = !agent.cfg.native && uc && jit_active();
	const unsigned ndepth = agent.cfg.native && uc ? agent.cfg.native_depth : jit ? 1 : 0;
	uint32_t cbytes = ncounters * (uint32_t)sizeof(uint64_t);
	struct strata_taskhint hint = { .at = -1, .len = 0 };
	uint32_t max = (uint32_t)(sizeof(struct rsample) + cbytes + depth * sizeof(struct strata_pyframe) + ndepth * 8u +
				  sizeof(hint.name));
	struct ring *ring = &s->ring;
	uint8_t *p = ring_reserve(ring, max);
	if (!p) {
		if (!alloc)
			atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
		return -1;
	}
	struct rsample *h = (struct rsample *)p;
	struct strata_pyframe *fr = (struct strata_pyframe *)(p + sizeof(*h) + cbytes);
	memset(h, 0, sizeof(*h));
	h->ncounters = (uint8_t)ncounters;
	if (ncounters)
		memcpy(p + sizeof(*h), counters, cbytes);
	h->time_ns = mono_ns();
	h->tid = (uint32_t)s->tid;
	h->weight = weight ? weight : 1;
	if (alloc)
		h->sample_flags |= RS_ALLOC;

	volatile int n = 0, gc = 0;
	uint32_t missing = 0;
	/* Loaded with dlopen, nothing stops the program from replacing our
	 * SIGSEGV handler (faulthandler.enable()); a guarded read must never
	 * fault into someone else's handler. */
	if (agent.by_tid && signals_guard_check()) {
		h->stack_flags |= STACK_PY_FAULT;
		ring_commit(ring, (uint32_t)(sizeof(*h) + cbytes));
		if (!alloc)
			atomic_fetch_add_explicit(&s->samples, 1, memory_order_relaxed);
		return 0;
	}
	if (sigsetjmp(s->guard_jb, 0) == 0) {
		s->guard_on = 1;
		if (agent_py->ready()) {
			void *ts = agent_py->current_tstate();
			if (ts) {
				s->tstate = ts;
				int g = 0;
				n = agent_py->walk(ts, fr, (int)depth, &missing, &g);
				gc = g;
				/* asyncio: which task this thread runs (its
				 * chain is resolved by the helper). */
				if (n && atomic_load_explicit(&agent.async_ready, memory_order_acquire))
					h->task = agent_py->running_task(ts, &agent.async_ref, &hint);
			}
		}
		s->guard_on = 0;
	} else {
		/* The walk touched unmapped memory: keep the sample (its time
		 * is real) without Python frames, and say so. */
		n = 0;
		gc = 0;
		missing = 0;
		h->task = 0;
		hint.at = -1;
		hint.len = 0;
		h->stack_flags |= STACK_PY_FAULT;
	}
	if (gc)
		h->stack_flags |= STACK_GC;
	for (int i = 0; i < n; i++)
		agent.code_seen[code_seen_slot(fr[i].code)] = 1;
	if (n == 0 && !(h->stack_flags & STACK_PY_FAULT))
		h->stack_flags |= phase_flag();
	h->npy = (uint16_t)n;
	h->py_missing = missing;
	if (missing)
		h->stack_flags |= STACK_PY_TRUNCATED;
	volatile int nn = 0;
	if (ndepth) {
		uint64_t *nat = (uint64_t *)(fr + n);
		volatile uint8_t nflags = 0;
		if (sigsetjmp(s->guard_jb, 0) == 0) {
			s->guard_on = 1;
			uint8_t f = 0;
			nn = jit ? jit_leaf_capture(uc, nat, &f) : unwind_capture(s, uc, nat, (int)ndepth, &f);
			nflags = f;
			s->guard_on = 0;
		} else {
			/* A stack word was unreadable: keep the frames found so
			 * far (unwind_capture stores as it goes). */
			atomic_store_explicit(&s->unwind_hazard, NULL, memory_order_release);
			nflags = jit ? 0 : STACK_NATIVE_FAILED;
			nn = jit ? 0 : s->native_progress;
		}
		h->stack_flags |= nflags;
		if (alloc) {
			/* Started in objects-sample.c: from the allocator's caller on. */
			int skip = 0;
			while (skip < nn && nat[skip] >= self_lo && nat[skip] < self_hi)
				skip++;
			if (skip) {
				memmove(nat, nat + skip, (size_t)(nn - skip) * 8u);
				nn -= skip;
			}
		}
		h->nnative = (uint16_t)nn;
	}
	uint32_t len = (uint32_t)(sizeof(*h) + cbytes + (uint32_t)n * sizeof(struct strata_pyframe) + (uint32_t)nn * 8u);
	if (h->task) {
		/* What the helper cannot read once the task has ended: where
		 * its coroutine frame is, and its name (after the frames). */
		if (hint.at >= 0 && hint.at < n)
			h->task_at = (uint16_t)(hint.at + 1);
		uint8_t nl = hint.len <= sizeof(hint.name) ? hint.len : 0;
		memcpy(p + len, hint.name, nl);
		h->task_name_len = nl;
		len += nl;
	}
	/* A ring a quarter full wakes the writer, which naps while it finds
	 * nothing to drain. */
	if (ring_commit(ring, len))
		link_poke();
	if (!alloc)
		atomic_fetch_add_explicit(&s->samples, 1, memory_order_relaxed);
	return 0;
}

void sample_alloc_init(void) { dl_iterate_phdr(self_range, (void *)(uintptr_t)&sample_alloc_init); }

int sample_alloc_capture(struct tslot *s, const void *uc, const uint64_t *words)
{
	return capture(s, uc, 1, NULL, 0, words);
}

/* The -e group's counts since this thread's previous sample: from the
 * leader's ring where the group is mapped (no descriptor involved), else
 * from one read() of the leader, once it is known to still be ours: a
 * program that closed it and reused the number must never have its data
 * read by us. Returns the number of values, 0 if there are none (the
 * sample then carries no counts rather than wrong ones).
 * Async-signal-safe: read(), ioctl() and arithmetic. */
static uint32_t read_counters(struct tslot *s, uint64_t *out)
{
	uint64_t buf[1 + EVENTS_MAX];
	if (s->ev_map) {
		if (trigger_counts(s, buf + 1) <= 0)
			return 0;
	} else {
		if (s->trigger_fd < 0 || (s->ev_id[0] && !trigger_is_ours(s, s->trigger_fd, 0))) {
			/* Only from 0: 2 (said) and 3 (a failed exec, to be
			 * said in its own terms) are the helper's to end. */
			int none = 0;
			atomic_compare_exchange_strong_explicit(&s->ev_lost, &none, 1, memory_order_relaxed,
								memory_order_relaxed);
			return 0;
		}
		ssize_t r = read(s->trigger_fd, buf, sizeof(buf));
		if (r < (ssize_t)sizeof(uint64_t) || buf[0] != s->ncounters ||
		    (size_t)r < (1 + s->ncounters) * sizeof(uint64_t))
			return 0;
	}
	for (uint32_t i = 0; i < s->ncounters; i++) {
		out[i] = buf[1 + i] - s->counter_prev[i];
		s->counter_prev[i] = buf[1 + i];
	}
	return s->ncounters;
}

/* A copy of the helper's descriptor hfd, or -1: the helper's pidfd is
 * open only for that moment. Async-signal-safe. */
static int helper_fd_copy(int hfd)
{
	pid_t helper = atomic_load_explicit(&agent.helper_pid, memory_order_relaxed);
	int hp = helper > 0 && hfd >= 0 ? (int)syscall(SYS_pidfd_open, helper, 0) : -1;
	if (hp < 0)
		return -1;
	int fd = (int)syscall(SYS_pidfd_getfd, hp, hfd, 0);
	close(hp);
	return fd;
}

/* A thread registered by the helper's scan, with -e counters: its events
 * were opened in the helper. Take a copy of the leader once, so counters
 * can be read here; the copy goes above the numbers a program uses.
 * Async-signal-safe. */
static void take_helper_fds(struct tslot *s)
{
	int fd = fd_high(helper_fd_copy(s->helper_fd));
	/* -2: no copy (ptrace rules forbid it); samples carry no counts, and
	 * the helper keeps its own. */
	s->trigger_fd = fd >= 0 ? fd : -2;
	if (fd >= 0)
		atomic_store(&s->fd_taken, 1);
}

/* An exec whose FINISH the helper did not answer in time (stopped,
 * starved, its output blocked): the event the helper opened for this
 * thread (cpu mode) still counts the thread, which the exec keeps, and
 * the new image's SIGPROF is back to the default: its next overflow
 * would kill it. A copy of the helper's descriptor, as take_helper_fds
 * takes one, switches the event off at the source: disabled, and no
 * signal (O_ASYNC belongs to the open file the copies share). The number
 * comes from the slot and the helper may have reused it: only an event
 * that signals this very thread is touched. Async-signal-safe (an exec
 * may be made from a handler). */
void sample_quiet_helper_trigger(struct tslot *s)
{
	int fd = helper_fd_copy(s->helper_fd);
	if (fd < 0)
		return;
	uint64_t id;
	struct f_owner_ex own;
	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 && fcntl(fd, F_GETOWN_EX, &own) == 0 &&
	    own.type == F_OWNER_TID && own.pid == s->tid)
		trigger_fd_silence(fd);
	close(fd);
}

/* Tags of the SIGPROFs the helper sends (rt_tgsigqueueinfo, SI_QUEUE),
 * so the handler tells them from anyone else's without looking at thread
 * state: a wall-mode tick, or "sampling was turned on or off, or the rate
 * changed: set your trigger so" (the helper cannot set a POSIX timer, nor
 * a perf event when ptrace rules keep it from taking a copy). */
#define WALL_TAG ((void *)&agent.sampler_slot)
#define TOGGLE_TAG ((void *)&agent.trigger)

static void apply_toggle(struct tslot *s)
{
	int on = atomic_load(&agent.sampling);
	if (s->has_timer)
		trigger_timer_arm(s, on);
	if (s->trigger_fd >= 0 && (!s->ev_id[0] || trigger_is_ours(s, s->trigger_fd, 0))) {
		if (on) {
			uint64_t period = agent.trigger == TRIGGER_PERF_EVENT ? agent.cfg.event_period : agent.cfg.period_ns;
			ioctl(s->trigger_fd, PERF_EVENT_IOC_PERIOD, &period);
		}
		trigger_fd_enable(s->trigger_fd, on, !s->external && !s->ev_map);
	}
}

int sample_signal_dispatch(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	int saved_errno = errno;
	/* Maps room the helper asked for (shm.h; under RLIMIT_AS only): the
	 * helper's next table or thread fits then. */
	shm_sync();
	struct tslot *s = tls_slot;
	int ours = 0;
	uint32_t weight = 1;
	if (!s && agent.by_tid) {
		/* A thread registered by a scan learns its slot here, once:
		 * the fault guard finds it through tls_slot from now on. */
		s = slot_by_tid((pid_t)syscall(SYS_gettid));
		if (s)
			tls_slot = s;
	}

	if (si->si_code == POLL_IN || si->si_code == POLL_HUP) {
		ours = s ? si->si_fd == s->sig_fd
			 : agent.trigger == TRIGGER_PERF_TASK_CLOCK || agent.trigger == TRIGGER_PERF_EVENT;
	} else if (si->si_code == SI_TIMER) {
		ours = s ? si->si_value.sival_ptr == (void *)s : agent.trigger == TRIGGER_POSIX_CPU_TIMER;
		weight = 1u + (uint32_t)(si->si_overrun > 0 ? si->si_overrun : 0);
	} else if (si->si_code == SI_QUEUE && si->si_pid == atomic_load_explicit(&agent.helper_pid, memory_order_relaxed) &&
		   (si->si_value.sival_ptr == WALL_TAG || si->si_value.sival_ptr == TOGGLE_TAG)) {
		/* The helper's signal is ours even when it reaches a thread
		 * that is not (or no longer) registered: tls_slot is NULL for
		 * a moment at both ends of a thread's life while the helper
		 * may still (or already) list it. Chaining it would kill the
		 * process with SIGPROF's default action. */
		ours = 1;
		if (si->si_value.sival_ptr == TOGGLE_TAG) {
			if (s)
				apply_toggle(s);
			errno = saved_errno;
			return 1;
		}
		/* The ticks since this thread's last wall sample (wall.c):
		 * more than one when it waited for a CPU meanwhile. */
		int ticks = s ? atomic_exchange(&s->wall_pending, 0) : 0;
		if (ticks <= 0)
			s = NULL;
		else
			weight = (uint32_t)ticks;
	}
	/* A late signal of an event or timer we no longer match (stopped,
	 * detached, a thread's slot renewed, its fd closed under a pending
	 * overflow): when the program has no SIGPROF handler of its own,
	 * chaining it would kill the process with SIGPROF's default action,
	 * which no program asked for. Taken and dropped. */
	if (!ours && (si->si_code == POLL_IN || si->si_code == POLL_HUP || si->si_code == SI_TIMER) &&
	    !signals_app_handles(SIGPROF)) {
		errno = saved_errno;
		return 1;
	}
	if (!ours || !s) {
		errno = saved_errno;
		return ours;
	}
	if (s->external && s->ncounters && s->trigger_fd == -1 && s->helper_fd >= 0)
		take_helper_fds(s);
	if (!s->in_handler) {
		s->in_handler = 1;
		if (atomic_load_explicit(&agent.sampling, memory_order_relaxed) &&
		    !atomic_load_explicit(&agent.stopping, memory_order_relaxed)) {
			uint64_t cnt[EVENTS_MAX];
			uint32_t nc = s->ncounters ? read_counters(s, cnt) : 0;
			capture(s, uc, weight, cnt, nc, NULL);
		}
		s->in_handler = 0;
	}
	/* A thread's own unmapped event is re-armed for one more overflow
	 * (REFRESH: a '$' ioctl, which no other kind of file acts on); one
	 * the helper opened, or mapped, runs freely. */
	if (!s->external && !s->ev_map && s->trigger_fd >= 0 && !atomic_load_explicit(&s->ev_lost, memory_order_relaxed) &&
	    atomic_load_explicit(&agent.sampling, memory_order_relaxed))
		ioctl(s->trigger_fd, PERF_EVENT_IOC_REFRESH, 1);
	errno = saved_errno;
	return 1;
}

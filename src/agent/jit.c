/*
 * jit.c — the signal handler's view of JIT-compiled code: whether a pc is
 * in it, and the JIT leaf of a stack without --native.
 *
 * The ranges are a sequence-count-published array in the shared region
 * (struct jit_ranges), written by the helper's poller (jit-poll.c), which
 * finds images through the GDB JIT interface: the handler retries a
 * bounded number of times when it sees an edit in progress. No
 * allocation, no lock, no free: nothing the handler reads can go away.
 */
#include <stdint.h>
#include <ucontext.h>

#include "shm/agent.h"
#include "common/format.h"

#define J (agent.jit)

/* Whether pc is in JIT code. Async-signal-safe: loads and a bounded retry. */
static int in_jit(uint64_t pc)
{
	for (int tries = 0; tries < 4; tries++) {
		uint32_t s0 = atomic_load_explicit(&J.seq, memory_order_acquire);
		if (s0 & 1)
			continue;
		uint32_t n = atomic_load_explicit(&J.n, memory_order_relaxed);
		if (n > JIT_MAX_RANGES)
			n = JIT_MAX_RANGES;
		uint32_t lo = 0, hi = n;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (atomic_load_explicit(&J.lo[mid], memory_order_relaxed) <= pc)
				lo = mid + 1;
			else
				hi = mid;
		}
		int hit = lo > 0 && pc < atomic_load_explicit(&J.hi[lo - 1], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&J.seq, memory_order_relaxed) == s0)
			return hit;
	}
	return 0;
}

int jit_active(void)
{
	return atomic_load_explicit(&J.n, memory_order_relaxed) != 0;
}

/* Whether the bytes before `ra` are a call instruction: a stale word on the
 * stack that happens to point into JIT code rarely is. */
static int after_call(uint64_t ra)
{
	const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)ra;
	if (p[-5] == 0xe8)                                /* call rel32 */
		return 1;
	if (p[-2] == 0xff && (p[-1] & 0xf8) == 0xd0)      /* call *%reg */
		return 1;
	if (p[-6] == 0xff && p[-5] == 0x15)               /* call *rel32(%rip) */
		return 1;
	if (p[-3] == 0x41 && p[-2] == 0xff && (p[-1] & 0xf8) == 0xd0) /* call *%r8-15 */
		return 1;
	return 0;
}

int jit_leaf_capture(const void *ucv, uint64_t *out, uint8_t *flags)
{
	const ucontext_t *uc = ucv;
	uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	if (in_jit(pc)) {
		out[0] = pc;
		*flags |= STACK_JIT_LEAF;
		return 1;
	}
	/* JIT code calls out (libm's sin and exp, Numba's runtime): the
	 * return address into it is a few words up the stack. The
	 * interpreter itself is not such a callee; elsewhere the first word
	 * that points into JIT code just after a call instruction is taken. */
	uint32_t ni = atomic_load_explicit(&J.ninterp, memory_order_acquire);
	for (uint32_t i = 0; i < ni && i < 4; i++)
		if (pc >= J.interp_lo[i] && pc < J.interp_hi[i])
			return 0;
	uint64_t sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	for (int k = 0; k < 48; k++) {
		uint64_t w = *(const volatile uint64_t *)(uintptr_t)(sp + 8u * (uint64_t)k);
		if (in_jit(w - 1) && after_call(w)) {
			out[0] = w;
			*flags |= STACK_JIT_LEAF | STACK_JIT_RETURN;
			return 1;
		}
	}
	return 0;
}


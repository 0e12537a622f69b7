/*
 * fakejit.c — a stand-in JIT for the discovery test: the GDB JIT interface
 * exactly as LLVM implements it (a descriptor and a no-op function the
 * debugger breaks on), driven from Python with ctypes so the test decides
 * when images come and go. Built as libfake_llvm_jit.so: the agent looks
 * for descriptors in loaded objects whose name says LLVM.
 */
#include <stdint.h>
#include <stdlib.h>

struct jit_code_entry {
	struct jit_code_entry *next, *prev;
	const char *symfile_addr;
	uint64_t symfile_size;
};

struct jit_descriptor {
	uint32_t version, action_flag;
	struct jit_code_entry *relevant_entry, *first_entry;
};

struct jit_descriptor __jit_debug_descriptor = { 1, 0, 0, 0 };

void __attribute__((noinline)) __jit_debug_register_code(void)
{
	__asm__ volatile("" ::: "memory");
}

void *fake_register(const char *img, uint64_t n)
{
	struct jit_code_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->symfile_addr = img;
	e->symfile_size = n;
	e->next = __jit_debug_descriptor.first_entry;
	if (e->next)
		e->next->prev = e;
	__jit_debug_descriptor.first_entry = e;
	__jit_debug_descriptor.relevant_entry = e;
	__jit_debug_descriptor.action_flag = 1; /* JIT_REGISTER_FN */
	__jit_debug_register_code();
	return e;
}

void fake_unregister(void *p)
{
	struct jit_code_entry *e = p;
	if (e->prev)
		e->prev->next = e->next;
	else
		__jit_debug_descriptor.first_entry = e->next;
	if (e->next)
		e->next->prev = e->prev;
	__jit_debug_descriptor.relevant_entry = e;
	__jit_debug_descriptor.action_flag = 2; /* JIT_UNREGISTER_FN */
	__jit_debug_register_code();
	free(e);
}

/*
 * test_jitfind.c — finding the GDB JIT descriptor of an LLVM that does not
 * name it (src/agentd/jit-find.c), on this test's own executable and
 * memory: a descriptor defined as LLVM defines it, beside look-alikes.
 *
 * - jit_desc_candidates lists the descriptor and a fresh look-alike that
 *   nothing tells apart in the file;
 * - jit_desc_verify takes the descriptor once it holds a list of entries
 *   that lead to ELF images, and refuses a fresh one, a torn or looping
 *   list, an entry that does not lead to an ELF image, a wild pointer.
 *
 * The target's memory is this process's (/proc/self/mem): jit-find.c
 * reads it through remote_read, defined here.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "../../src/agentd/jit-find.h"
#include "../../src/agentd/remote.h"

/* As LLVM's JITLoaderGDB.cpp / GDBRegistrationListener.cpp: the version
 * set statically. */
struct gdb_jit_descriptor __jit_debug_descriptor = { 1, 0, 0, 0 };
/* A fresh look-alike: a candidate too, until the program uses one. */
struct gdb_jit_descriptor lookalike = { 1, 0, 0, 0 };

static int mem = -1;

int remote_read(void *dst, uint64_t addr, size_t n)
{
	size_t done = 0;
	if (!addr)
		return -1;
	while (done < n) {
		ssize_t r = pread(mem, (char *)dst + done, n - done, (off_t)(addr + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uint64_t *)data = info->dlpi_addr;
	return 1; /* the executable comes first */
}

static int listed(const uint64_t *c, int n, uint64_t bias, const void *p)
{
	for (int i = 0; i < n; i++)
		if (c[i] + bias == (uint64_t)(uintptr_t)p)
			return 1;
	return 0;
}

static void candidates(void)
{
	uint64_t bias = 0;
	dl_iterate_phdr(first_object, &bias);

	/* Not JIT_DESC_MAX_CANDIDATES: built with ASan, this file has 173
	 * look-alikes (its globals' metadata). */
	static uint64_t c[4096];
	int n = jit_desc_candidates("/proc/self/exe", c, 4096);
	CHECK(n >= 2); /* the two fresh ones below at least */
	CHECK(listed(c, n, bias, &__jit_debug_descriptor)); /* the descriptor is a candidate */
	CHECK(listed(c, n, bias, &lookalike)); /* a fresh look-alike is a candidate */
	CHECK(jit_desc_candidates("/nonexistent", c, 4096) <= 0); /* no file */
	CHECK(jit_desc_candidates("/proc/self/exe", c, 1) == -1); /* more than asked for */
}

static void verify(void)
{

	uint64_t d = (uint64_t)(uintptr_t)&__jit_debug_descriptor;
	CHECK(!jit_desc_verify(d)); /* a fresh descriptor is not (yet) one in use */

	/* Two registered images (an ELF header each is what is checked). */
	static Elf64_Ehdr img1, img2;
	for (Elf64_Ehdr *h = &img1; h; h = h == &img1 ? &img2 : NULL) {
		memcpy(h->e_ident, ELFMAG, SELFMAG);
		h->e_ident[EI_CLASS] = ELFCLASS64;
		h->e_ident[EI_DATA] = ELFDATA2LSB;
	}
	static struct gdb_jit_entry e1, e2;
	e1 = (struct gdb_jit_entry){ (uint64_t)(uintptr_t)&e2, 0, (uint64_t)(uintptr_t)&img1, 4096 };
	e2 = (struct gdb_jit_entry){ 0, (uint64_t)(uintptr_t)&e1, (uint64_t)(uintptr_t)&img2, sizeof(img2) };
	/* img1's size runs past the struct; only its header is read. */
	__jit_debug_descriptor = (struct gdb_jit_descriptor){ 1, 1, (uint64_t)(uintptr_t)&e1, (uint64_t)(uintptr_t)&e1 };
	CHECK(jit_desc_verify(d)); /* a descriptor with two images */

	e2.prev = 0;
	CHECK(!jit_desc_verify(d)); /* an entry that does not point back */
	e2.prev = (uint64_t)(uintptr_t)&e1;
	e2.next = (uint64_t)(uintptr_t)&e1;
	CHECK(!jit_desc_verify(d)); /* a loop */
	e2.next = 0;
	img2.e_ident[EI_MAG1] = 'X';
	CHECK(!jit_desc_verify(d)); /* an entry that does not lead to ELF */
	img2.e_ident[EI_MAG1] = ELFMAG1;
	img2.e_ident[EI_CLASS] = ELFCLASS32;
	CHECK(!jit_desc_verify(d)); /* a 32-bit image */
	img2.e_ident[EI_CLASS] = ELFCLASS64;
	e2.symfile_size = 16;
	CHECK(!jit_desc_verify(d)); /* an image smaller than its header */
	e2.symfile_size = 1ull << 40;
	CHECK(!jit_desc_verify(d)); /* an image too large to be one */
	e2.symfile_size = sizeof(img2);
	CHECK(jit_desc_verify(d)); /* repaired */
	__jit_debug_descriptor.action_flag = 7;
	CHECK(!jit_desc_verify(d)); /* an action GDB does not know */
	__jit_debug_descriptor.action_flag = 2;
	__jit_debug_descriptor.version = 2;
	CHECK(!jit_desc_verify(d)); /* another version */
	__jit_debug_descriptor.version = 1;
	CHECK(jit_desc_verify(d)); /* after an unregistration */

	/* A look-alike that came to hold other data. */
	uint64_t wild[4] = { 0x10, 0, 0, 0 };
	lookalike = (struct gdb_jit_descriptor){ 1, 1, 0x1000, 0x1000 }; /* unmapped */
	CHECK(!jit_desc_verify((uint64_t)(uintptr_t)&lookalike)); /* a wild pointer */
	lookalike.first_entry = (uint64_t)(uintptr_t)wild + 1;
	CHECK(!jit_desc_verify((uint64_t)(uintptr_t)&lookalike)); /* a misaligned entry */
	lookalike.first_entry = (uint64_t)(uintptr_t)wild;
	CHECK(!jit_desc_verify((uint64_t)(uintptr_t)&lookalike)); /* an entry whose symfile is no image */

}

int main(void)
{
	mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	CHECK(mem >= 0);
	RUN(candidates);
	RUN(verify);
	return test_summary();
}

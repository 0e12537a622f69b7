/*
 * fuzz.h — what the libFuzzer targets of tests/fuzz/ share: taking an
 * input apart field by field, a memory file to hand a parser that reads
 * a path or a descriptor, and silencing the code under test's messages
 * without silencing the sanitizers (they write to descriptor 2 directly,
 * the code under test through stdio's stderr).
 *
 * Each target is one fuzz_NAME.c with its seeds in tests/fuzz/corpus/NAME/
 * (tests/fuzz/mkcorpus.sh makes them); tests/fuzz/fuzz.mk builds and runs
 * them; docs/fuzzing.md says what each one covers.
 */
#ifndef STRATA_FUZZ_H
#define STRATA_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* An input read front to back; past the end every field is 0. */
struct fin {
	const uint8_t *p;
	size_t n;
};

static inline uint64_t fin_uint(struct fin *f, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++) {
		if (f->n) {
			v |= (uint64_t)f->p[0] << (8 * i);
			f->p++;
			f->n--;
		}
	}
	return v;
}
#define fin_u8(f) ((uint8_t)fin_uint(f, 1))
#define fin_u16(f) ((uint16_t)fin_uint(f, 2))
#define fin_u32(f) ((uint32_t)fin_uint(f, 4))
#define fin_u64(f) fin_uint(f, 8)

/* Up to n bytes (fewer at the end of the input); *got says how many. */
static inline const uint8_t *fin_take(struct fin *f, size_t n, size_t *got)
{
	if (n > f->n)
		n = f->n;
	const uint8_t *p = f->p;
	f->p += n;
	f->n -= n;
	*got = n;
	return p;
}

/* Every target's LLVMFuzzerInitialize. The code under test reports
 * through stdio (errorf, warnings, reports to stdout): those go to
 * /dev/null. The sanitizers and libFuzzer keep descriptor 2 (libFuzzer
 * took its copy of the stderr pointer before any target code runs).
 * The symbolizer must not ask a debuginfod server about the build ids an
 * input makes up. */
static inline void fuzz_setup(void)
{
	unsetenv("DEBUGINFOD_URLS");
	FILE *null = fopen("/dev/null", "w");
	if (!null || !freopen("/dev/null", "w", stdout))
		abort();
	stderr = null;
}

/* A file in memory with these contents (offset 0); its path is
 * /proc/self/fd/FD. */
static inline int fuzz_memfd(void)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	return fd;
}

static inline void fuzz_memfd_set(int fd, const void *d, size_t n)
{
	if (ftruncate(fd, 0) || (n && pwrite(fd, d, n, 0) != (ssize_t)n) || lseek(fd, 0, SEEK_SET))
		abort();
}

static inline void fuzz_fd_path(char *out, size_t n, int fd)
{
	snprintf(out, n, "/proc/self/fd/%d", fd);
}

/* An invariant of the code under test broke: a crash libFuzzer keeps
 * (written to descriptor 2, whatever stderr now is). */
#define FUZZ_CHECK(cond)                                                                                \
	do {                                                                                            \
		if (!(cond)) {                                                                          \
			dprintf(2, "fuzz check failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);      \
			abort();                                                                        \
		}                                                                                       \
	} while (0)

#endif

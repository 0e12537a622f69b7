/*
 * remote.c — see remote.h.
 */
#include "remote.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/agent.h"
#include "common/elfsect.h"

static struct {
	pid_t pid;
	int mem;
} R = { .mem = -1 };

int remote_init(pid_t pid, int mem_fd)
{
	R.pid = pid;
	R.mem = mem_fd;
	return 0;
}

pid_t remote_pid(void) { return R.pid; }

int remote_read(void *dst, uint64_t addr, size_t n)
{
	if (!addr || R.mem < 0)
		return -1;
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(R.mem, (char *)dst + done, n - done, (off_t)(addr + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

int remote_write(uint64_t addr, const void *src, size_t n)
{
	if (!addr || R.mem < 0)
		return -1;
	ssize_t r;
	do
		r = pwrite(R.mem, src, n, (off_t)addr);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)n ? 0 : -1;
}

int remote_read_cb(void *ctx, void *dst, uint64_t addr, size_t n)
{
	(void)ctx;
	return remote_read(dst, addr, n);
}

int remote_read_str(char *dst, uint64_t addr, size_t n)
{
	size_t got = 0;
	while (got + 1 < n) {
		/* Up to the end of the page: the next may be unmapped. */
		size_t chunk = 4096 - (size_t)((addr + got) & 4095);
		if (chunk > n - 1 - got)
			chunk = n - 1 - got;
		if (remote_read(dst + got, addr + got, chunk))
			return -1;
		void *z = memchr(dst + got, 0, chunk);
		if (z)
			return 0;
		got += chunk;
	}
	dst[n - 1] = 0;
	return 0;
}

/* The public head of glibc's struct link_map and struct r_debug. */
struct rlink {
	uint64_t l_addr, l_name, l_ld, l_next, l_prev;
};

static int read_phdrs_file(struct robj *o)
{
	int fd = open(o->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int rc = -1;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		o->nph = 0;
		for (uint32_t i = 0; i < eh.e_phnum && o->nph < 64; i++) {
			Elf64_Phdr p;
			if (pread(fd, &p, sizeof(p), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(p))) != (ssize_t)sizeof(p))
				break;
			o->ph[o->nph++] = (struct rseg){ p.p_vaddr, p.p_memsz, p.p_filesz, p.p_offset, p.p_type, p.p_flags };
		}
		rc = o->nph ? 0 : -1;
	}
	close(fd);
	return rc;
}

/* The ELF header and program headers read from the target's memory at
 * addr (the vDSO; any object whose file is gone). */
static int read_phdrs_mem(struct robj *o, uint64_t ehdr_addr)
{
	Elf64_Ehdr eh;
	if (remote_read(&eh, ehdr_addr, sizeof(eh)) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return -1;
	o->nph = 0;
	for (uint32_t i = 0; i < eh.e_phnum && o->nph < 64; i++) {
		Elf64_Phdr p;
		if (remote_read(&p, ehdr_addr + eh.e_phoff + (uint64_t)i * sizeof(p), sizeof(p)))
			break;
		o->ph[o->nph++] = (struct rseg){ p.p_vaddr, p.p_memsz, p.p_filesz, p.p_offset, p.p_type, p.p_flags };
	}
	return o->nph ? 0 : -1;
}

int remote_objects(int (*fn)(const struct robj *o, void *data), void *data)
{
	uint64_t rd = agent.r_debug;
	struct {
		int32_t version;
		int32_t pad;
		uint64_t map;
	} head;
	if (!rd || remote_read(&head, rd, sizeof(head)))
		return -1;
	struct robj *o = malloc(sizeof(*o));
	if (!o)
		return -1;
	uint64_t at = head.map;
	for (int steps = 0; at && steps < 100000; steps++) {
		struct rlink l;
		if (remote_read(&l, at, sizeof(l))) {
			free(o);
			return -1;
		}
		memset(o, 0, offsetof(struct robj, ph));
		o->bias = l.l_addr;
		o->ld = l.l_ld;
		if (l.l_name && remote_read_str(o->name, l.l_name, sizeof(o->name)))
			o->name[0] = 0;
		int ok = -1;
		if (steps == 0) {
			/* The executable is first, with an empty name. Its
			 * headers are read through /proc: the file may have
			 * been replaced or deleted since it started. */
			o->is_main = 1;
			char p[64];
			snprintf(p, sizeof(p), "/proc/%d/exe", (int)R.pid);
			snprintf(o->path, sizeof(o->path), "%s", p);
			ok = read_phdrs_file(o);
			ssize_t n = readlink(p, o->path, sizeof(o->path) - 1);
			o->path[n > 0 ? n : 0] = 0;
		} else if (!strncmp(o->name, "linux-vdso", 10) || !strncmp(o->name, "linux-gate", 10)) {
			o->is_vdso = 1;
			snprintf(o->path, sizeof(o->path), "[vdso]");
			ok = agent.vdso ? read_phdrs_mem(o, agent.vdso) : -1;
		} else if (o->name[0]) {
			snprintf(o->path, sizeof(o->path), "%s", o->name);
			ok = read_phdrs_file(o);
			if (ok)
				ok = read_phdrs_mem(o, o->bias);
		}
		if (ok == 0 && fn(o, data))
			break;
		at = l.l_next;
	}
	free(o);
	return 0;
}

uint64_t remote_objects_gen(void)
{
	uint64_t rd = agent.r_debug;
	struct {
		int32_t version;
		int32_t pad;
		uint64_t map;
	} head;
	if (!rd || remote_read(&head, rd, sizeof(head)))
		return 0;
	uint64_t h = 0xcbf29ce484222325ull;
	uint64_t at = head.map;
	for (int steps = 0; at && steps < 100000; steps++) {
		struct rlink l;
		if (remote_read(&l, at, sizeof(l)))
			return 0;
		h = (h ^ l.l_addr) * 0x100000001b3ull;
		h = (h ^ l.l_ld) * 0x100000001b3ull;
		h = (h ^ at) * 0x100000001b3ull;
		at = l.l_next;
	}
	return h | 1;
}


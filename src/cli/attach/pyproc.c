/*
 * pyproc.c — see pyproc.h.
 */
#include "pyproc.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/elfsect.h"
#include "ptstop.h"

const char *proc_status_field(pid_t pid, const char *key, char *out, size_t n)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	out[0] = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return out;
	size_t kl = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl)) {
			char *v = line + kl;
			while (*v == ' ' || *v == '\t')
				v++;
			v[strcspn(v, "\n")] = 0;
			snprintf(out, n, "%s", v);
			break;
		}
	fclose(f);
	return out;
}

/* Yama's ptrace_scope, or -1 where the kernel has no Yama. */
static int yama_scope(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int v = -1;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

int pyproc_open(struct pyproc *p, pid_t pid, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->mem = -1;
	char uidl[128];
	if (pid <= 0 || (kill(pid, 0) && errno == ESRCH) || !proc_status_field(pid, "Uid:", uidl, sizeof(uidl))[0]) {
		snprintf(err, errlen, "no process %d", (int)pid);
		return -1;
	}
	char st[64];
	proc_status_field(pid, "State:", st, sizeof(st));
	if (st[0] == 'Z' || st[0] == 'X') {
		snprintf(err, errlen, "process %d has exited (it is a zombie, waiting for its parent)", (int)pid);
		return -1;
	}
	unsigned ruid = 0, euid = 0;
	sscanf(uidl, "%u %u", &ruid, &euid);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(path, p->exe, sizeof(p->exe) - 1);
	p->exe[n > 0 ? n : 0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	p->mem = open(path, O_RDWR | O_CLOEXEC);
	if (p->mem < 0)
		p->mem = open(path, O_RDONLY | O_CLOEXEC);
	if (p->mem >= 0)
		return 0;
	int e = errno;
	if (e == ENOENT || e == ESRCH) {
		snprintf(err, errlen, "no process %d", (int)pid);
		return -1;
	}
	if (geteuid() != 0 && (euid != geteuid() || ruid != getuid())) {
		snprintf(err, errlen,
			 "permission denied: process %d belongs to uid %u; run strata as that user (sudo -u '#%u' strata ...)",
			 (int)pid, euid, euid);
		return -1;
	}
	int y = yama_scope();
	if (y >= 1 && (e == EACCES || e == EPERM)) {
		if (y >= 3)
			snprintf(err, errlen,
				 "reading process %d is refused by Yama (kernel.yama.ptrace_scope = 3: no process may be "
				 "traced until the next reboot)", (int)pid);
		else
			snprintf(err, errlen,
				 "reading process %d is refused by Yama (kernel.yama.ptrace_scope = %d: %s); run strata as "
				 "root or with CAP_SYS_PTRACE, or allow it with: sysctl kernel.yama.ptrace_scope=0",
				 (int)pid, y, y == 1 ? "only a process's ancestors may trace it" : "only root may trace");
		return -1;
	}
	snprintf(err, errlen,
		 "cannot read the memory of process %d: %s (it may be setuid, or not dumpable: prctl PR_SET_DUMPABLE)",
		 (int)pid, strerror(e));
	return -1;
}

void pyproc_close(struct pyproc *p)
{
	if (p->mem >= 0)
		close(p->mem);
	p->mem = -1;
}

int pyproc_read(struct pyproc *p, void *dst, uint64_t addr, size_t n)
{
	if (!addr || p->mem < 0)
		return -1;
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(p->mem, (char *)dst + done, n - done, (off_t)(addr + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

int pyproc_write(struct pyproc *p, uint64_t addr, const void *src, size_t n)
{
	if (!addr || p->mem < 0)
		return -1;
	size_t done = 0;
	while (done < n) {
		ssize_t r = pwrite(p->mem, (const char *)src + done, n - done, (off_t)(addr + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

int pyproc_read_cb(void *ctx, void *dst, uint64_t addr, size_t n)
{
	return pyproc_read(ctx, dst, addr, n);
}

int pyproc_maps(pid_t pid, int (*fn)(const struct pmap *m, void *data), void *data)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char line[4400];
	struct pmap m;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e, off;
		char perms[8];
		int pos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s%n", &s, &e, perms, &off, &pos) != 4)
			continue;
		char *pth = line + pos;
		while (*pth == ' ')
			pth++;
		pth[strcspn(pth, "\n")] = 0;
		size_t pl = strlen(pth);
		if (pl > 10 && !strcmp(pth + pl - 10, " (deleted)"))
			pth[pl - 10] = 0;
		m.start = s;
		m.end = e;
		m.off = off;
		snprintf(m.perms, sizeof(m.perms), "%.4s", perms);
		snprintf(m.path, sizeof(m.path), "%s", pth);
		if (fn(&m, data))
			break;
	}
	fclose(f);
	return 0;
}

/* The load bias of an ELF file whose mapping at file offset `off` starts
 * at `start`: the segment containing that offset says where it was meant
 * to be. */
static int elf_bias(const char *path, uint64_t start, uint64_t off, uint64_t *bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int rc = -1;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) != (ssize_t)sizeof(ph))
				break;
			if (ph.p_type != PT_LOAD)
				continue;
			uint64_t poff = ph.p_offset & ~(uint64_t)0xfff;
			if (off >= poff && off < ph.p_offset + ph.p_filesz + 0x1000) {
				*bias = start - ((ph.p_vaddr & ~(uint64_t)0xfff) + (off - poff));
				rc = 0;
				break;
			}
		}
	}
	close(fd);
	return rc;
}

struct obj_find {
	const char *suffix;
	char *path;
	size_t n;
	uint64_t start, off;
	int found;
};

static int match_obj(const struct pmap *m, void *data)
{
	struct obj_find *o = data;
	if (m->path[0] != '/')
		return 0;
	size_t sl = strlen(o->suffix), pl = strlen(m->path);
	int ok;
	if (sl && o->suffix[sl - 1] == '*') {
		const char *slash = strrchr(m->path, '/');
		ok = slash && !strncmp(slash, o->suffix, sl - 1);
	} else {
		ok = pl >= sl && !strcmp(m->path + pl - sl, o->suffix);
	}
	if (!ok)
		return 0;
	snprintf(o->path, o->n, "%s", m->path);
	o->start = m->start;
	o->off = m->off;
	o->found = 1;
	return 1;
}

int pyproc_object(pid_t pid, const char *suffix, char *path, size_t n, char *file, size_t fn, uint64_t *bias)
{
	struct obj_find o = { suffix, path, n, 0, 0, 0 };
	if (pyproc_maps(pid, match_obj, &o) || !o.found)
		return -1;
	return pyproc_object_at(pid, path, o.start, o.off, file, fn, bias);
}

int pyproc_object_at(pid_t pid, const char *path, uint64_t start, uint64_t off, char *file, size_t fn,
		     uint64_t *bias)
{
	/* The file as the target sees it: through its root (containers). */
	snprintf(file, fn, "/proc/%d/root%s", (int)pid, path);
	if (access(file, R_OK) != 0)
		snprintf(file, fn, "%s", path);
	return elf_bias(file, start, off, bias);
}


struct sect_find {
	const char *name;
	pid_t pid;
	char last[4096];
	uint64_t addr, size;
};

static int match_sect(const struct pmap *m, void *data)
{
	struct sect_find *f = data;
	if (m->path[0] != '/' || !strcmp(m->path, f->last))
		return 0;
	snprintf(f->last, sizeof(f->last), "%s", m->path);
	char file[4200];
	struct elf_section s;
	uint64_t bias;
	if (pyproc_object_at(f->pid, m->path, m->start, m->off, file, sizeof(file), &bias) ||
	    elf_find_section(file, f->name, &s))
		return 0;
	f->addr = bias + s.addr;
	f->size = s.size;
	return 1;
}

int pyproc_section(pid_t pid, const char *name, uint64_t *addr, uint64_t *size)
{
	struct sect_find f = { .name = name, .pid = pid };
	if (pyproc_maps(pid, match_sect, &f) || !f.addr)
		return -1;
	*addr = f.addr;
	*size = f.size;
	return 0;
}

/* "3.X" from a file name like libpython3.8.so.1.0 or python3.10; 0 and
 * the minor in *minor, or -1. */
static int minor_from_name(const char *path, int *minor, int *ft)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	const char *q = strstr(b, "python3.");
	if (!q)
		return -1;
	char *end;
	long m = strtol(q + 8, &end, 10);
	if (end == q + 8 || m < 0 || m > 99)
		return -1;
	*minor = (int)m;
	*ft = *end == 't';
	return 0;
}

/* Which reader build serves version `want` ("3.11.2" or "3.8"): the exact
 * one, else another build of the same minor (layouts do not change within
 * one), preferring a version named in the interpreter's own path (pyenv's
 * versions/3.8.18/). */
static int find_reader(const char *dir, const char *want, const char *hint, char *out, size_t n)
{
	char exact[128], minor[64];
	snprintf(exact, sizeof(exact), "strata-pyreader-%s.so", want);
	const char *d1 = strchr(want, '.');
	const char *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	int ml = (int)(d2 ? (size_t)(d2 - want) : strlen(want));
	snprintf(minor, sizeof(minor), "strata-pyreader-%.*s.", ml, want);
	DIR *dp = opendir(dir);
	if (!dp)
		return -1;
	struct dirent *e;
	int found = 0, hinted = 0;
	while ((e = readdir(dp))) {
		if (!strcmp(e->d_name, exact)) {
			snprintf(out, n, "%s/%s", dir, e->d_name);
			found = 2;
			break;
		}
		if (strncmp(e->d_name, minor, strlen(minor)) || hinted)
			continue;
		/* The X.Y.Z of this build, as a path component of the hint. */
		char v[64], comp[80];
		snprintf(v, sizeof(v), "%s", e->d_name + strlen("strata-pyreader-"));
		char *so = strstr(v, ".so");
		if (so)
			*so = 0;
		snprintf(comp, sizeof(comp), "/%s/", v);
		if (hint && strstr(hint, comp))
			hinted = 1;
		snprintf(out, n, "%s/%s", dir, e->d_name);
		found = 1;
	}
	closedir(dp);
	return found ? 0 : -1;
}

/* Whether the process has a dynamic loader (AT_BASE in its auxiliary
 * vector): 1, 0 (static), or -1 if its auxv could not be read. */
static int has_interpreter(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	uint64_t av[128];
	ssize_t n = read(fd, av, sizeof(av));
	close(fd);
	if (n <= 0)
		return -1;
	for (size_t i = 0; i + 1 < (size_t)n / 8; i += 2) {
		if (av[i] == AT_NULL)
			break;
		if (av[i] == AT_BASE)
			return av[i + 1] != 0;
	}
	return 0;
}

int pyproc_wait_loaded(struct pyproc *p, int timeout_ms, double *waited_ms, char *err, size_t errlen)
{
	uint64_t t0 = ptstop_now_ns();
	char path[4096], file[4200];
	uint64_t bias;
	while (pyproc_object(p->pid, "/libc.so.6", path, sizeof(path), file, sizeof(file), &bias) != 0 &&
	       has_interpreter(p->pid) == 1) {
		if (ptstop_now_ns() - t0 > (uint64_t)timeout_ms * 1000000u) {
			snprintf(err, errlen,
				 "process %d is still starting: its dynamic loader had not mapped its libraries after "
				 "%.1f s; nothing was changed in it, try again",
				 (int)p->pid, timeout_ms / 1000.0);
			return -1;
		}
		if (kill(p->pid, 0) && errno == ESRCH) {
			snprintf(err, errlen, "no process %d (it exited while starting)", (int)p->pid);
			return -1;
		}
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (waited_ms)
		*waited_ms += (double)(ptstop_now_ns() - t0) / 1e6;
	return 0;
}

int pyproc_python(struct pyproc *p, const char *dir, char *err, size_t errlen)
{
	uint64_t bias = 0, rt = 0;
	int minor = -1, ft = 0;
	/* A libpython if one is loaded, else the executable. */
	if (pyproc_object(p->pid, "/libpython3*", p->pyobj, sizeof(p->pyobj), p->pyfile, sizeof(p->pyfile), &bias) == 0)
		rt = elf_symbol(p->pyfile, "_PyRuntime", NULL);
	if (!rt) {
		char tail[4200];
		snprintf(tail, sizeof(tail), "%s", p->exe);
		if (pyproc_object(p->pid, tail, p->pyobj, sizeof(p->pyobj), p->pyfile, sizeof(p->pyfile), &bias) == 0)
			rt = elf_symbol(p->pyfile, "_PyRuntime", NULL);
	}
	if (!rt) {
		snprintf(err, errlen, "process %d (%s) is not a CPython process: neither it nor a libpython it loaded "
			 "has the symbol _PyRuntime (CPython 3.7 or later)", (int)p->pid, p->exe);
		return -1;
	}
	p->pybias = bias;
	p->syms.runtime = rt + bias;
	/* The exact version: Py_Version (3.11+) is PY_VERSION_HEX. */
	uint64_t pv = elf_symbol(p->pyfile, "Py_Version", NULL);
	uint32_t hex = 0;
	if (pv && pyproc_read(p, &hex, pv + bias, sizeof(hex)) == 0 && (hex >> 24) == 3) {
		snprintf(p->version, sizeof(p->version), "%u.%u.%u", hex >> 24, hex >> 16 & 0xff, hex >> 8 & 0xff);
		minor = (int)(hex >> 16 & 0xff);
		minor_from_name(p->pyobj, &(int){ 0 }, &ft);
	} else if (minor_from_name(p->pyobj, &minor, &ft) == 0 || minor_from_name(p->exe, &minor, &ft) == 0) {
		snprintf(p->version, sizeof(p->version), "3.%d", minor);
	} else {
		snprintf(err, errlen, "cannot tell the Python version of process %d (%s): no Py_Version symbol "
			 "(before 3.11) and no version in the file name", (int)p->pid, p->pyobj);
		return -1;
	}
	if (minor < 8) {
		snprintf(err, errlen, "process %d runs Python %s, which strata does not support (3.8 and later)",
			 (int)p->pid, p->version);
		return -1;
	}
	if (ft) {
		snprintf(err, errlen, "process %d runs a free-threaded Python %s (%s), which strata does not support",
			 (int)p->pid, p->version, p->pyobj);
		return -1;
	}
	static const char *const types[] = { "PyCode_Type", "PyFrame_Type", "PyUnicode_Type", "PyBytes_Type" };
	uint64_t *dst[] = { &p->syms.code_type, &p->syms.frame_type, &p->syms.unicode_type, &p->syms.bytes_type };
	for (int i = 0; i < 4; i++) {
		uint64_t a = elf_symbol(p->pyfile, types[i], NULL);
		if (!a) {
			snprintf(err, errlen, "process %d: %s has no symbol %s", (int)p->pid, p->pyobj, types[i]);
			return -1;
		}
		*dst[i] = a + bias;
	}
	if (!dir || find_reader(dir, p->version, p->pyobj, p->reader_path, sizeof(p->reader_path))) {
		snprintf(err, errlen,
			 "no reader for Python %s in %s: build one with make PYTHONS=%s (the target's interpreter; "
			 "it needs its internal headers)", p->version, dir ? dir : "(agent directory not found)", p->exe);
		return -1;
	}
	void *h = dlopen(p->reader_path, RTLD_NOW | RTLD_LOCAL);
	strata_pyreader_init_fn init = h ? (strata_pyreader_init_fn)dlsym(h, STRATA_PYREADER_INIT_SYM) : NULL;
	struct strata_remote r = { .read = pyproc_read_cb, .ctx = p, .syms = p->syms };
	p->reader = init ? init(&r) : NULL;
	if (!p->reader || p->reader->api_version != STRATA_PYAPI_VERSION) {
		snprintf(err, errlen, "%s does not match this strata (rebuild with make)", p->reader_path);
		p->reader = NULL;
		return -1;
	}
	/* The reader may be another patch release's build: on 3.13+ its
	 * offsets are checked against the target's own _Py_DebugOffsets
	 * before anything is read with them (docs/versions.md). */
	if (p->reader->check && p->reader->check(p->exe, err, errlen)) {
		p->reader = NULL;
		return -1;
	}
	return 0;
}

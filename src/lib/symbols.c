/*
 * symbols.c — see symbols.h. Each distinct object gets its own libdwfl
 * session, reported at load bias 0, so its addresses are the ELF file's
 * own and one session serves every process that mapped the object. A
 * per-object memo keeps repeated addresses (most of a profile's) cheap.
 * This file owns the objects, the address spaces and the lookup; what an
 * object's ELF file says (function symbols, PLT stubs, FDE bounds, the
 * eval loop's parts) is read in symbols-elf.c, the function and the
 * functions inlined at an address from DWARF in symbols-dwarf.c, and the
 * state the three share is in symbols-internal.h.
 *
 * Debug information is found the way gdb and elfutils find it: a
 * separate debug file by build id (D/.build-id/xx/yyyy.debug) or by
 * .gnu_debuglink, in /usr/lib/debug and the directories of
 * STRATA_DEBUG_DIRS, then, when DEBUGINFOD_URLS names servers, from
 * debuginfod (libdwfl asks them itself). An object whose file is gone, or
 * now has a different build id than the recorded one (reinstalled since),
 * is looked up by the recorded build id instead: its executable or debug
 * file in those directories, then from debuginfod (through the client
 * library, loaded the way libdw loads it). Without any of them its frames
 * show as object+offset: the file at the path is not trusted.
 */
#include "symbols.h"
#include "symbols-internal.h"
#include "merge.h"

#include <dlfcn.h>
#include <elfutils/debuginfod.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* libstdc++'s demangler (linked with -lstdc++). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

struct memo {
	uint64_t key;           /* vaddr + 1 (0 = empty) | call flag in bit 63 */
	const char *name;
	uint64_t sym_offset;
	const char *file;
	uint32_t line;
	uint32_t func_line;
	const char *func_file;
	uint64_t func_start;
	const struct sym_inline *inl;
	uint32_t ninl;
};

struct mapping {
	uint64_t start, end, bias;
	struct symfile *f;
	int live;
};

struct sym_space {
	struct sym_space *next;
	struct symbolizer *owner;
	struct mapping *m;
	size_t n, cap;
};

struct strnode {
	struct strnode *next;
	char s[];
};

int sym_is_interpreter_path(const char *path)
{
	if (!path)
		return 0;
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	if (!strncmp(b, "libpython", 9))
		return 1;
	if (strncmp(b, "python", 6))
		return 0;
	for (b += 6; *b; b++)
		if (!((*b >= '0' && *b <= '9') || *b == '.' || *b == 'd' || *b == 'm' || *b == 't'))
			return 0; /* python3.11-config, python-foo: not the interpreter */
	return 1;
}

struct symbolizer *sym_new(void)
{
	struct symbolizer *s = calloc(1, sizeof(struct symbolizer));
	if (!s)
		return NULL;
	const char *dirs = getenv("STRATA_DEBUG_DIRS");
	if (!dirs)
		dirs = "";
	size_t n = strlen(dirs) + sizeof(":.debug::/usr/lib/debug");
	if (!(s->debuginfo_path = malloc(n))) {
		free(s);
		return NULL;
	}
	snprintf(s->debuginfo_path, n, ":.debug:%s%s/usr/lib/debug", dirs, *dirs ? ":" : "");
	s->cb = (Dwfl_Callbacks){
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
		.debuginfo_path = &s->debuginfo_path,
	};
	return s;
}

void sym_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (struct symfile *f = s->files, *n; f; f = n) {
		n = f->next;
		if (f->dwfl)
			dwfl_end(f->dwfl);
		free(f->path);
		free(f->found_path);
		free(f->image);
		free(f->memo);
		free(f->eval);
		free(f->plt);
		free(f->fdes);
		free(f->syms);
		free(f);
	}
	for (struct sym_space *sp = s->spaces, *n; sp; sp = n) {
		n = sp->next;
		free(sp->m);
		free(sp);
	}
	for (struct inl_block *b = s->inl, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	if (s->dbgd.client)
		s->dbgd.end(s->dbgd.client);
	if (s->dbgd.so)
		dlclose(s->dbgd.so);
	free(s->debuginfo_path);
	free(s->strtab);
	for (struct strnode *t = s->strings, *n; t; t = n) {
		n = t->next;
		free(t);
	}
	free(s);
}

struct sym_space *sym_space_new(struct symbolizer *s)
{
	struct sym_space *sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	sp->owner = s;
	sp->next = s->spaces;
	s->spaces = sp;
	return sp;
}

static struct symfile *get_file(struct symbolizer *s, const struct rec_module *m)
{
	for (struct symfile *f = s->files; f; f = f->next)
		if (!strcmp(f->path, m->path) && f->build_id_len == m->build_id_len &&
		    (!m->build_id_len || !memcmp(f->build_id, m->build_id, m->build_id_len)) &&
		    f->image_len == m->image_len)
			return f;
	struct symfile *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(m->path))) {
		free(f);
		return NULL;
	}
	if (m->build_id_len && m->build_id_len <= sizeof(f->build_id)) {
		memcpy(f->build_id, m->build_id, m->build_id_len);
		f->build_id_len = m->build_id_len;
	}
	if (m->image_len && (f->image = malloc(m->image_len))) {
		memcpy(f->image, m->image, m->image_len);
		f->image_len = m->image_len;
	}
	f->interpreter = sym_is_interpreter_path(m->path);
	f->next = s->files;
	s->files = f;
	return f;
}

int sym_space_add(struct sym_space *sp, const struct rec_module *m)
{
	if (m->flags & MOD_UNLOADED) {
		for (size_t i = sp->n; i-- > 0;)
			if (sp->m[i].live && sp->m[i].start == m->start && sp->m[i].end == m->end) {
				sp->m[i].live = 0;
				break;
			}
		return 0;
	}
	struct symfile *f = get_file(sp->owner, m);
	if (!f)
		return -1;
	if (sp->n == sp->cap) {
		size_t cap = sp->cap ? sp->cap * 2 : 64;
		struct mapping *n = realloc(sp->m, cap * sizeof(*n));
		if (!n)
			return -1;
		sp->m = n;
		sp->cap = cap;
	}
	sp->m[sp->n++] = (struct mapping){ m->start, m->end, m->bias, f, 1 };
	return 0;
}

/* Reports the ELF file open at `fd` as the object, in a session of its
 * own (which takes over fd). Returns 0, or -1 (fd closed, nothing kept)
 * when it is no ELF file or not the build the profile recorded. */
static int report_file(struct symbolizer *s, struct symfile *f, int fd, const char *file)
{
	Dwfl *dwfl = dwfl_begin(&s->cb);
	if (!dwfl) {
		close(fd);
		return -1;
	}
	dwfl_report_begin(dwfl);
	const char *base = strrchr(f->path, '/');
	Dwfl_Module *mod = dwfl_report_elf(dwfl, base ? base + 1 : f->path, file, fd, 0, 0);
	dwfl_report_end(dwfl, NULL, NULL);
	if (!mod) {
		/* dwfl_report_elf keeps fd only when it made a module. */
		close(fd);
		dwfl_end(dwfl);
		return -1;
	}
	if (f->build_id_len) {
		const unsigned char *bits;
		GElf_Addr vaddr;
		int n = dwfl_module_build_id(mod, &bits, &vaddr);
		if (n > 0 && ((size_t)n != f->build_id_len || memcmp(bits, f->build_id, f->build_id_len))) {
			dwfl_end(dwfl); /* a different build */
			return -1;
		}
	}
	f->dwfl = dwfl;
	f->mod = mod;
	return 0;
}

/* A regular file only: the path comes from the profile, and a FIFO or a
 * device named there must not block or feed the report. */
static int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static struct dbgd *debuginfod(struct symbolizer *s)
{
	struct dbgd *d = &s->dbgd;
	if (!d->tried) {
		d->tried = 1;
		const char *urls = getenv("DEBUGINFOD_URLS");
		if (!urls || !*urls || !(d->so = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL)))
			return NULL;
		d->begin = (__typeof__(d->begin))dlsym(d->so, "debuginfod_begin");
		d->end = (__typeof__(d->end))dlsym(d->so, "debuginfod_end");
		d->find_executable = (__typeof__(d->find_executable))dlsym(d->so, "debuginfod_find_executable");
		d->find_debuginfo = (__typeof__(d->find_debuginfo))dlsym(d->so, "debuginfod_find_debuginfo");
		if (!d->begin || !d->end || !d->find_executable || !d->find_debuginfo || !(d->client = d->begin())) {
			dlclose(d->so);
			d->so = NULL;
		}
	}
	return d->client ? d : NULL;
}

/* The recorded build of an object whose file is gone or was replaced,
 * by its build id: its executable (D/.build-id/xx/yyyy, as Fedora links
 * them) or its debug file (D/.build-id/xx/yyyy.debug) in each absolute
 * directory D of the debug path, then the same from debuginfod. With the
 * executable everything works as with the original file; with only a
 * debug file, names, lines and inlined functions do (its copies of
 * .eh_frame and .text are empty). Returns 0 with the object reported, -1
 * if no file is found. */
static int open_by_build_id(struct symbolizer *s, struct symfile *f)
{
	char hex[2 * sizeof(f->build_id) + 1];
	for (size_t i = 0; i < f->build_id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", f->build_id[i]);
	for (int debug = 0; debug < 2; debug++)
		for (const char *d = s->debuginfo_path; *d;) {
			size_t n = strcspn(d, ":");
			if (*d == '/' && n < 4096) {
				char path[4096 + sizeof(hex) + 32];
				snprintf(path, sizeof(path), "%.*s/.build-id/%.2s/%s%s", (int)n, d, hex, hex + 2,
					 debug ? ".debug" : "");
				int fd = open_regular(path);
				if (fd >= 0 && report_file(s, f, fd, path) == 0) {
					if (!debug)
						f->elf_path = f->found_path = strdup(path);
					return 0;
				}
			}
			d += n + (d[n] == ':');
		}
	struct dbgd *dd = debuginfod(s);
	for (int debug = 0; dd && debug < 2; debug++) {
		char *path = NULL;
		int fd = (debug ? dd->find_debuginfo : dd->find_executable)(dd->client, f->build_id,
									     (int)f->build_id_len, &path);
		if (fd >= 0 && report_file(s, f, fd, path ? path : f->path) == 0) {
			if (!debug && path)
				f->elf_path = f->found_path = path;
			else
				free(path);
			return 0;
		}
		free(path);
	}
	return -1;
}

/* Opens the object on first use. */
static int file_open(struct symbolizer *s, struct symfile *f)
{
	if (f->opened)
		return f->ok;
	f->opened = 1;
	if (f->image_len) {
		/* An object with no file (the vDSO): libdwfl reads it from a
		 * memory file holding the recorded image. */
		int fd = memfd_create("strata-image", MFD_CLOEXEC);
		if (fd < 0 || write(fd, f->image, f->image_len) != (ssize_t)f->image_len) {
			if (fd >= 0)
				close(fd);
			return 0;
		}
		if (report_file(s, f, fd, f->path))
			return 0;
	} else {
		int fd = open_regular(f->path);
		if (fd >= 0 && report_file(s, f, fd, f->path) == 0)
			f->elf_path = f->path;
		else if (!f->build_id_len || open_by_build_id(s, f))
			return 0;
	}
	f->ok = 1;
	if (f->interpreter)
		find_eval(f);
	return 1;
}

static uint32_t str_hash(const char *str)
{
	uint32_t h = 2166136261u;
	for (; *str; str++)
		h = (h ^ (uint8_t)*str) * 16777619u;
	return h;
}

/* One copy of each name however many addresses carry it. */
const char *intern_str(struct symbolizer *s, const char *str)
{
	if ((s->nstrings + 1) * 2 > s->strtab_cap) {
		uint32_t cap = s->strtab_cap ? s->strtab_cap * 2 : 256;
		struct strnode **t = calloc(cap, sizeof(*t));
		if (!t)
			return NULL;
		for (uint32_t i = 0; i < s->strtab_cap; i++) {
			if (!s->strtab[i])
				continue;
			uint32_t j = str_hash(s->strtab[i]->s) & (cap - 1);
			while (t[j])
				j = (j + 1) & (cap - 1);
			t[j] = s->strtab[i];
		}
		free(s->strtab);
		s->strtab = t;
		s->strtab_cap = cap;
	}
	uint32_t j = str_hash(str) & (s->strtab_cap - 1);
	while (s->strtab[j]) {
		if (!strcmp(s->strtab[j]->s, str))
			return s->strtab[j]->s;
		j = (j + 1) & (s->strtab_cap - 1);
	}
	size_t n = strlen(str);
	struct strnode *t = malloc(sizeof(*t) + n + 1);
	if (!t)
		return NULL;
	memcpy(t->s, str, n + 1);
	t->next = s->strings;
	s->strings = t;
	s->strtab[j] = t;
	s->nstrings++;
	return t->s;
}

const char *demangle(struct symbolizer *s, const char *name)
{
	/* glibc's .symtab names versioned symbols NAME@@VERSION (or
	 * NAME@VERSION): the version is not part of the function's name. */
	const char *at = name ? strchr(name, '@') : NULL;
	if (at && at > name) {
		char buf[1024];
		size_t n = (size_t)(at - name);
		if (n < sizeof(buf)) {
			memcpy(buf, name, n);
			buf[n] = 0;
			const char *r = intern_str(s, buf);
			if (r)
				name = r;
		}
	}
	if (!name || name[0] != '_' || name[1] != 'Z')
		return name;
	int status = 0;
	char *d = __cxa_demangle(name, NULL, NULL, &status);
	if (!d || status != 0) {
		free(d);
		return name;
	}
	const char *r = intern_str(s, d);
	free(d);
	return r ? r : name;
}

static struct memo *memo_slot(struct symfile *f, uint64_t key, int *found)
{
	if ((f->memo_n + 1) * 2 > f->memo_cap) {
		uint32_t cap = f->memo_cap ? f->memo_cap * 2 : 1024;
		struct memo *n = calloc(cap, sizeof(*n));
		if (!n)
			return NULL;
		for (uint32_t i = 0; i < f->memo_cap; i++) {
			if (!f->memo[i].key)
				continue;
			uint32_t j = (uint32_t)((f->memo[i].key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
			while (n[j].key)
				j = (j + 1) & (cap - 1);
			n[j] = f->memo[i];
		}
		free(f->memo);
		f->memo = n;
		f->memo_cap = cap;
	}
	uint32_t j = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (f->memo_cap - 1);
	while (f->memo[j].key && f->memo[j].key != key)
		j = (j + 1) & (f->memo_cap - 1);
	*found = f->memo[j].key == key;
	return &f->memo[j];
}

void sym_lookup(struct sym_space *sp, uint64_t addr, int call, struct sym_info *out)
{
	memset(out, 0, sizeof(*out));
	const struct mapping *m = NULL;
	for (size_t i = sp->n; i-- > 0;)
		if (sp->m[i].start <= addr && addr < sp->m[i].end && (sp->m[i].live || !m)) {
			m = &sp->m[i];
			if (m->live)
				break;
		}
	if (!m)
		return;
	struct symfile *f = m->f;
	out->module = f->path;
	out->offset = addr - m->bias;
	out->interpreter = f->interpreter;
	if (!file_open(sp->owner, f))
		return;
	uint64_t a = out->offset - (call ? 1 : 0);
	for (uint32_t i = 0; i < f->neval; i++)
		if (a >= f->eval[i][0] && a < f->eval[i][1])
			out->eval = 1;
	int found = 0;
	struct memo *e = memo_slot(f, (a + 1) | (call ? 1ull << 63 : 0), &found);
	if (e && found) {
		out->name = e->name;
		out->sym_offset = e->sym_offset;
		out->file = e->file;
		out->line = e->line;
		out->func_file = e->func_file;
		out->func_line = e->func_line;
		out->func_start = e->func_start;
		out->inl = e->inl;
		out->ninl = e->ninl;
		return;
	}
	/* PLT stubs first: no symbol covers them, but a sizeless one before
	 * them might seem to. */
	const struct plt_stub *pl = plt_stub(sp->owner, f, a);
	const struct fsym *fs = pl ? NULL : find_sym(f, a);
	if (pl) {
		out->name = pl->name;
		out->func_start = pl->lo;
		out->sym_offset = a - pl->lo + (call ? 1 : 0);
	} else if (fs) {
		out->name = demangle(sp->owner, fs->name);
		out->sym_offset = a - fs->lo + (call ? 1 : 0);
		out->func_start = fs->lo;
	}
	if (out->eval && !merge_is_eval_name(out->name)) {
		/* The unnamed cold part of a stripped interpreter's eval loop
		 * (find_eval): whatever symbol precedes it is not its name. */
		for (uint32_t i = 0; i < f->neval; i++)
			if (a >= f->eval[i][0] && a < f->eval[i][1]) {
				out->name = "_PyEval_EvalFrameDefault.cold";
				out->func_start = f->eval[i][0];
				out->sym_offset = a - f->eval[i][0] + (call ? 1 : 0);
			}
	}
	Dwfl_Line *l = dwfl_module_getsrc(f->mod, a);
	if (l) {
		int lineno = 0;
		const char *file = dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL);
		if (file && lineno > 0) {
			out->file = file;
			out->line = (uint32_t)lineno;
		}
	}
	func_scope(sp->owner, f, a, out);
	if (!out->func_start)
		out->func_start = fde_start(f, a);
	if (e) {
		e->key = (a + 1) | (call ? 1ull << 63 : 0);
		e->name = out->name;
		e->sym_offset = out->sym_offset;
		e->file = out->file;
		e->line = out->line;
		e->func_file = out->func_file;
		e->func_line = out->func_line;
		e->func_start = out->func_start;
		e->inl = out->inl;
		e->ninl = out->ninl;
		f->memo_n++;
	}
}

/*
 * symbols.c — see symbols.h. Each distinct object gets its own libdwfl
 * session, reported at load bias 0, so its addresses are the ELF file's
 * own and one session serves every process that mapped the object. A
 * per-object memo keeps repeated addresses (most of a profile's) cheap.
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
#include "merge.h"
#include "common/cfi.h"
#include "common/elfsect.h"

#include <dlfcn.h>
#include <capstone/capstone.h>
#include <dwarf.h>
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

struct symfile {
	struct symfile *next;
	char *path;
	/* The file whose sections (.eh_frame, .text) are read directly: the
	 * object at `path`, the same build found by build id, or NULL when
	 * only a debug file is there (its copies of them are empty). */
	const char *elf_path;
	char *found_path;       /* elf_path when it is not `path` (owned) */
	uint8_t build_id[64];
	size_t build_id_len;
	uint8_t *image;
	size_t image_len;
	int opened, ok;
	int interpreter;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	struct memo *memo;
	uint32_t memo_cap, memo_n;
	/* Where the eval loop's code is, in file addresses (interpreter only). */
	uint64_t (*eval)[2];
	uint32_t neval;
	/* PLT stubs, named NAME@plt (no symbol table names them). */
	struct plt_stub *plt;
	uint32_t nplt;
	int plt_done;
	/* Function symbols sorted by address: libdwfl's own address lookup
	 * scans every symbol, which is too slow for a profile's many
	 * distinct addresses (python3.11: 100 us a lookup). */
	struct fsym *syms;
	uint32_t nsyms;
	int syms_done;
	/* FDE ranges, for the bounds of functions without a symbol. */
	uint64_t (*fdes)[2];
	uint32_t nfdes;
	int fdes_done;
};

struct fsym {
	uint64_t lo, hi;
	const char *name;
	uint32_t rank;   /* 0 global, 1 weak, 2 local: the name preferred for an address */
};

struct plt_stub {
	uint64_t lo, hi;
	const char *name;
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

/* Chains of inlined functions (sym_info.inl), packed in blocks. */
struct inl_block {
	struct inl_block *next;
	uint32_t n, cap;
	struct sym_inline v[];
};

/* debuginfod's client library, loaded on first use when DEBUGINFOD_URLS
 * is set (dlopen, as libdw does: strata runs where it is not installed). */
struct dbgd {
	int tried;
	void *so;
	__typeof__(debuginfod_begin) *begin;
	__typeof__(debuginfod_end) *end;
	__typeof__(debuginfod_find_executable) *find_executable;
	__typeof__(debuginfod_find_debuginfo) *find_debuginfo;
	debuginfod_client *client;
};

struct symbolizer {
	struct symfile *files;
	struct inl_block *inl;
	/* libdwfl's callbacks and debug file path: ":.debug:" (next to the
	 * object, its .debug/), STRATA_DEBUG_DIRS, "/usr/lib/debug". */
	Dwfl_Callbacks cb;
	char *debuginfo_path;
	struct dbgd dbgd;
	struct sym_space *spaces;
	struct strnode *strings; /* demangled and unversioned names */
	struct strnode **strtab; /* the same, hashed, so each is kept once */
	uint32_t strtab_cap, nstrings;
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

static void add_eval(struct symfile *f, uint64_t lo, uint64_t hi)
{
	uint64_t(*n)[2] = realloc(f->eval, (f->neval + 1) * sizeof(*n));
	if (!n)
		return;
	f->eval = n;
	f->eval[f->neval][0] = lo;
	f->eval[f->neval][1] = hi;
	f->neval++;
}

/* The target of a direct jump (jmp or jcc, rel8 or rel32) decoded at
 * address a, or 0 if the instruction is none. */
static uint64_t jump_target(const uint8_t *p, size_t len, uint64_t a)
{
	size_t i = 0;
	while (i < len && (p[i] == 0x2e || p[i] == 0x3e || p[i] == 0xf2)) /* branch hints, bnd */
		i++;
	uint64_t next = a + len;
	int32_t rel;
	if (len - i == 5 && p[i] == 0xe9) {
		memcpy(&rel, p + i + 1, 4);
	} else if (len - i == 6 && p[i] == 0x0f && (p[i + 1] & 0xf0) == 0x80) {
		memcpy(&rel, p + i + 2, 4);
	} else if (len - i == 2 && (p[i] == 0xeb || (p[i] & 0xf0) == 0x70)) {
		rel = (int8_t)p[i + 1];
	} else {
		return 0;
	}
	return next + (uint64_t)(int64_t)rel;
}

static int same_cfa(const struct cfi_rules *a, const struct cfi_rules *b)
{
	return a->cfa.kind == b->cfa.kind && a->cfa.reg == b->cfa.reg && a->cfa.off == b->cfa.off;
}

#define MAX_EVAL_PARTS 32

/* Finds the eval loop in CPython: its symbols, and when the object has no
 * .symtab (Debian strips it; only the exported _PyEval_EvalFrameDefault is
 * in .dynsym), its unnamed parts. gcc moves blocks of a function into
 * another FDE (`NAME.cold`: the unlikely paths, or with profile feedback
 * whatever the training run did not execute, which in Debian's 3.14 and
 * 3.15 is most of the loop's body, 82-84 KB beside a named part of about
 * 1 KB). Such a part is entered only by jumps from its own function, with
 * the function's frame live, so it is found by following the code, not
 * by how its frame looks (the registers its first CFI row says are saved
 * differ from build to build): every direct jump of a known part whose
 * target lies outside the known parts leads into a part of the eval loop
 * when the FDE it lands in does not start as a function does (CFA rsp+8:
 * a jump to a function's entry is a tail call) and the CFA rule at the
 * jump and at its target are the same (the jump carries the frame over
 * unchanged). Parts found are followed the same way. Checked on Debian's
 * 3.11 (one .cold part of 7.5 KB), 3.14.10 and 3.15.2 (tests/unit/test_symbols.c). */
static void find_eval(struct symfile *f)
{
	int nsyms = dwfl_module_getsymtab(f->mod);
	uint64_t hot_lo = 0, hot_hi = 0;
	int named_parts = 0;
	for (int i = 0; i < nsyms; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, NULL, NULL, NULL);
		if (!merge_is_eval_name(name) || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_size)
			continue;
		add_eval(f, addr, addr + sym.st_size);
		if (name[strlen("_PyEval_EvalFrameDefault")])
			named_parts = 1;
		else
			hot_lo = addr, hot_hi = addr + sym.st_size;
	}
	if (named_parts || !hot_hi || !f->elf_path)
		return;
	struct elf_section sec, tsec;
	if (elf_find_section(f->elf_path, ".eh_frame", &sec) ||
	    elf_find_section(f->elf_path, ".text", &tsec) || hot_lo < tsec.addr || hot_hi > tsec.addr + tsec.size)
		return;
	uint8_t *data = elf_read_section(f->elf_path, &sec);
	if (!data)
		return;
	struct cfi_table t;
	struct cfi_source src = { data, sec.size, sec.addr, 0 };
	uint64_t(*fdes)[2] = NULL;
	uint32_t nfdes = 0;
	int rc = cfi_build_section(&t, &src, 0, NULL);
	if (rc == CFI_OK && cfi_fde_ranges(&src, 0, &fdes, &nfdes) != CFI_OK) {
		cfi_table_free(&t);
		rc = CFI_E_FORMAT;
	}
	free(data);
	if (rc != CFI_OK)
		return;
	uint8_t *text = elf_read_section(f->elf_path, &tsec);
	csh h;
	cs_insn *ins = NULL;
	if (!text || cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) {
		free(text);
		free(fdes);
		cfi_table_free(&t);
		return;
	}
	ins = cs_malloc(h);
	uint64_t parts[MAX_EVAL_PARTS][2] = { { hot_lo, hot_hi } };
	uint32_t nparts = 1;
	for (uint32_t k = 0; k < nparts && ins; k++) {
		const uint8_t *code = text + (parts[k][0] - tsec.addr);
		size_t size = parts[k][1] - parts[k][0];
		uint64_t a = parts[k][0];
		while (size) {
			if (!cs_disasm_iter(h, &code, &size, &a, ins)) {
				code++, size--, a++; /* not code: resynchronise */
				continue;
			}
			uint64_t to = jump_target(ins->bytes, ins->size, ins->address);
			if (!to)
				continue;
			int known = 0;
			for (uint32_t j = 0; j < nparts && !known; j++)
				known = to >= parts[j][0] && to < parts[j][1];
			if (known || nparts == MAX_EVAL_PARTS)
				continue;
			/* The FDE it lands in. */
			uint32_t lo = 0, hi = nfdes;
			while (lo < hi) {
				uint32_t mid = lo + (hi - lo) / 2;
				if (fdes[mid][0] <= to)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (!lo || to >= fdes[lo - 1][1])
				continue;
			uint64_t plo = fdes[lo - 1][0], phi = fdes[lo - 1][1];
			uint32_t r0 = cfi_rule_at(&t, plo, NULL), rs = cfi_rule_at(&t, ins->address, NULL),
				 rt = cfi_rule_at(&t, to, NULL);
			if (r0 == CFI_NO_RULE || rs == CFI_NO_RULE || rt == CFI_NO_RULE)
				continue;
			const struct cfi_rules *first = &t.rules[r0];
			if (first->cfa.kind == CFA_REG && first->cfa.reg == DW_RSP && first->cfa.off == 8)
				continue; /* a function's entry: a tail call */
			if (!same_cfa(&t.rules[rs], &t.rules[rt]) || plo < tsec.addr || phi > tsec.addr + tsec.size)
				continue;
			parts[nparts][0] = plo;
			parts[nparts][1] = phi;
			nparts++;
			add_eval(f, plo, phi);
		}
	}
	cs_free(ins, 1);
	cs_close(&h);
	free(text);
	free(fdes);
	cfi_table_free(&t);
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
static const char *intern_str(struct symbolizer *s, const char *str)
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

static const char *demangle(struct symbolizer *s, const char *name)
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

/* The PLT stubs of x86-64 lazy binding: in .plt, 16-byte entries after
 * the 16-byte PLT0, entry i+1 jumping through relocation i of .rela.plt;
 * with IBT, .plt.sec holds the stubs called, entry i for relocation i. */
static void load_plt(struct symbolizer *s, struct symfile *f)
{
	f->plt_done = 1;
	if (!f->elf_path && !f->image_len)
		return; /* a debug file: its .plt and .rela.plt are empty copies */
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(f->mod, &bias);
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	GElf_Shdr plt = { 0 }, plt_sec = { 0 }, rela = { 0 };
	Elf_Scn *rela_scn = NULL;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		const char *nm = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!nm)
			continue;
		if (!strcmp(nm, ".plt"))
			plt = sh;
		else if (!strcmp(nm, ".plt.sec"))
			plt_sec = sh;
		else if (!strcmp(nm, ".rela.plt") && sh.sh_type == SHT_RELA)
			rela = sh, rela_scn = scn;
	}
	if (!rela_scn || !plt.sh_size || !rela.sh_entsize)
		return;
	Elf_Scn *dynsym = elf_getscn(elf, rela.sh_link);
	GElf_Shdr dsh;
	Elf_Data *rd = elf_getdata(rela_scn, NULL), *sd = dynsym ? elf_getdata(dynsym, NULL) : NULL;
	if (!rd || !sd || !gelf_getshdr(dynsym, &dsh))
		return;
	size_t n = rela.sh_size / rela.sh_entsize;
	uint64_t base = plt_sec.sh_size ? plt_sec.sh_addr : plt.sh_addr + 16;
	uint64_t limit = plt_sec.sh_size ? plt_sec.sh_addr + plt_sec.sh_size : plt.sh_addr + plt.sh_size;
	if (n > (limit - base) / 16)
		n = (limit - base) / 16;
	f->plt = calloc(n ? n : 1, sizeof(*f->plt));
	if (!f->plt)
		return;
	for (size_t i = 0; i < n; i++) {
		GElf_Rela r;
		GElf_Sym sym;
		if (!gelf_getrela(rd, (int)i, &r) || !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym))
			continue;
		const char *nm = elf_strptr(elf, dsh.sh_link, sym.st_name);
		char buf[512];
		if (!nm || !*nm || snprintf(buf, sizeof(buf), "%s@plt", nm) >= (int)sizeof(buf))
			continue;
		/* Versions in .dynsym are elsewhere: the name is plain. */
		const char *in = intern_str(s, buf);
		if (in)
			f->plt[f->nplt++] = (struct plt_stub){ base + 16 * i + bias, base + 16 * (i + 1) + bias, in };
	}
}

static const struct plt_stub *plt_stub(struct symbolizer *s, struct symfile *f, uint64_t a)
{
	if (!f->plt_done)
		load_plt(s, f);
	uint32_t lo = 0, hi = f->nplt;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->plt[mid].hi <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->nplt && f->plt[lo].lo <= a ? &f->plt[lo] : NULL;
}

static int fsym_cmp(const void *x, const void *y)
{
	const struct fsym *a = x, *b = y;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static void load_syms(struct symfile *f)
{
	f->syms_done = 1;
	int n = dwfl_module_getsymtab(f->mod);
	if (n <= 0 || !(f->syms = malloc((size_t)n * sizeof(*f->syms))))
		return;
	uint32_t k = 0;
	for (int i = 0; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf = NULL;
		Dwarf_Addr bias = 0;
		const char *name = dwfl_module_getsym_info(f->mod, i, &sym, &addr, &shndx, &elf, &bias);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (!name || !*name || !addr || shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		uint64_t hi = addr + sym.st_size;
		if (!sym.st_size) {
			/* No size (_init, hand-written assembly): it may run to
			 * the next symbol, never past the end of its section
			 * (.init is followed by the PLT). Marked by hi < lo
			 * until the next symbol is known. */
			GElf_Shdr sh;
			Elf_Scn *scn = elf && shndx < SHN_LORESERVE ? elf_getscn(elf, shndx) : NULL;
			hi = scn && gelf_getshdr(scn, &sh) && sh.sh_addr + bias + sh.sh_size > addr
				     ? sh.sh_addr + bias + sh.sh_size : addr + 1;
			hi = ~hi;
		}
		f->syms[k++] = (struct fsym){ addr, hi, name, bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2 };
	}
	qsort(f->syms, k, sizeof(*f->syms), fsym_cmp);
	for (uint32_t i = 0; i < k; i++)
		if (f->syms[i].hi < f->syms[i].lo) {
			uint64_t end = ~f->syms[i].hi;
			uint32_t j = i + 1;
			while (j < k && f->syms[j].lo == f->syms[i].lo)
				j++;
			f->syms[i].hi = j < k && f->syms[j].lo < end ? f->syms[j].lo : end;
		}
	f->nsyms = k;
}

/* The symbol containing `a`: of those that do, the one starting last, and
 * of several there the global one (aliases: memcpy, __memcpy...). */
static const struct fsym *find_sym(struct symfile *f, uint64_t a)
{
	if (!f->syms_done)
		load_syms(f);
	uint32_t lo = 0, hi = f->nsyms;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->syms[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	const struct fsym *best = NULL;
	/* Walk back over the symbols starting at or before a; nested
	 * symbols are rare, so a few steps suffice. */
	for (uint32_t i = lo, steps = 0; i-- > 0 && steps < 32; steps++) {
		const struct fsym *c = &f->syms[i];
		if (best && c->lo < best->lo)
			break;
		if (a < c->hi && (!best || c->rank <= best->rank))
			best = c;
	}
	return best;
}

/* The file name of DWARF file index `idx` of the CU `cu`, or NULL. */
static const char *cu_file(Dwarf_Die *cu, Dwarf_Word idx)
{
	Dwarf_Files *files;
	size_t n;
	if (dwarf_getsrcfiles(cu, &files, &n) != 0 || idx >= n)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

/* The name DWARF gives a subprogram or an inlined instance of one (through
 * its abstract origin): the linkage name demangled, else the plain name. */
static const char *die_name(struct symbolizer *s, Dwarf_Die *d)
{
	Dwarf_Attribute at;
	const char *nm = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_linkage_name, &at));
	nm = nm ? demangle(s, nm) : dwarf_diename(d);
	return nm && *nm ? nm : NULL;
}

/* Where an inlined instance was called from: the line in the code around
 * it. DW_AT_call_file indexes the line table of the CU holding the
 * instance. Returns 0 if DWARF does not say. */
static int call_site(Dwarf_Die *inl, const char **file, uint32_t *line)
{
	Dwarf_Attribute at;
	Dwarf_Word cf, cl;
	Dwarf_Die cu;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &at), &cf) != 0 ||
	    dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &at), &cl) != 0 || cl == 0 || cl > UINT32_MAX ||
	    !dwarf_diecu(inl, &cu, NULL, NULL))
		return 0;
	const char *f = cu_file(&cu, cf);
	if (!f)
		return 0;
	*file = f;
	*line = (uint32_t)cl;
	return 1;
}

/* Room for inlined chains, kept until sym_free. */
static struct sym_inline *inl_alloc(struct symbolizer *s, uint32_t n)
{
	struct inl_block *b = s->inl;
	if (!b || b->cap - b->n < n) {
		uint32_t cap = n > 1024 ? n : 1024;
		b = malloc(sizeof(*b) + (size_t)cap * sizeof(b->v[0]));
		if (!b)
			return NULL;
		b->n = 0;
		b->cap = cap;
		b->next = s->inl;
		s->inl = b;
	}
	struct sym_inline *v = &b->v[b->n];
	b->n += n;
	return v;
}

/* Inlining deeper than this keeps its innermost levels' place in the
 * function (the line it called) but not the levels themselves. */
#define MAX_INLINE 64

/* The concrete scopes around pc, found in one descent from the CU: at
 * each level only the child whose code ranges hold pc is entered (C++
 * namespaces and classes, which hold no code of their own, are looked
 * into). Fills *sub with the subprogram and inl[] with the inlined
 * instances, innermost first; returns 1 if a subprogram was found.
 * libdw's dwarf_getscopes finds the innermost instance too, but the code
 * an instance is inlined into takes a dwarf_getscopes_die per level,
 * each a walk of the whole CU from its start: in a big CU (CPython's
 * ceval.c) that was most of the time `report` spent on a native profile
 * (bench/inline.py). */
static int scope_path(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *sub, Dwarf_Die *inl, uint32_t *ninl, int *deep)
{
	Dwarf_Die path[MAX_INLINE + 1];
	uint32_t n = 0;
	int have_sub = 0;
	Dwarf_Die parent = *cu, child;
	for (int guard = 0; guard < 4096; guard++) {
		if (dwarf_child(&parent, &child) != 0)
			break;
		int entered = 0;
		do {
			int tag = dwarf_tag(&child);
			switch (tag) {
			case DW_TAG_subprogram:
			case DW_TAG_inlined_subroutine:
			case DW_TAG_lexical_block:
				if (dwarf_haspc(&child, pc) != 1)
					continue;
				if (tag == DW_TAG_subprogram) {
					/* A function nested in another (a
					 * GNU C nested function) is the one
					 * running: start the chain over. */
					*sub = child;
					have_sub = 1;
					n = 0;
				} else if (tag == DW_TAG_inlined_subroutine && have_sub) {
					if (n < MAX_INLINE + 1)
						path[n++] = child;
					else
						*deep = 1;
				}
				entered = 1;
				break;
			case DW_TAG_namespace:
			case DW_TAG_class_type:
			case DW_TAG_structure_type:
			case DW_TAG_union_type:
			case DW_TAG_module:
				if (have_sub || !dwarf_haschildren(&child))
					continue;
				/* Look inside; come back to the siblings
				 * after, if pc is not there. */
				{
					Dwarf_Die s2;
					uint32_t n2 = 0;
					int deep2 = 0;
					Dwarf_Die inl2[MAX_INLINE];
					if (scope_path(&child, pc, &s2, inl2, &n2, &deep2)) {
						*sub = s2;
						memcpy(inl, inl2, n2 * sizeof(*inl));
						*ninl = n2;
						*deep = deep2;
						return 1;
					}
				}
				continue;
			default:
				continue;
			}
			if (entered)
				break;
		} while (dwarf_siblingof(&child, &child) == 0);
		if (!entered)
			break;
		parent = child;
	}
	if (!have_sub)
		return 0;
	if (n > MAX_INLINE) {
		n = MAX_INLINE;
		*deep = 1;
	}
	/* path[] is outermost first; inl[] is innermost first. */
	for (uint32_t i = 0; i < n; i++)
		inl[i] = path[n - 1 - i];
	*ninl = n;
	return 1;
}

/* From DWARF: the function (DW_TAG_subprogram) that contains `a`, where it
 * is declared, its name when no ELF symbol gave one, and the functions
 * inlined at `a` (DW_TAG_inlined_subroutine), outermost first, each with
 * the line executing in it. The function's own line is the call site of
 * the outermost inlined function, so that out->file/line always point
 * into the function reported, not into a header it inlined. */
static void func_scope(struct symbolizer *s, struct symfile *f, uint64_t a, struct sym_info *out)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(f->mod, a, &bias);
	if (!cu)
		return;
	/* dwarf_getscopes stops at the innermost inlined instance (its chain
	 * goes on through the abstract instance); the code it is inlined
	 * into is found by asking for the scopes around that DIE itself, as
	 * many times as inlining is nested. */
	Dwarf_Die inl[MAX_INLINE]; /* innermost first */
	uint32_t ninl = 0;
	Dwarf_Die sub;
	int have_sub = 0, deep = 0;
	const char *call_file = NULL; /* the outermost call site seen */
	uint32_t call_line = 0;
	Dwarf_Die *scopes = NULL;
	int n = 0;
	if (scope_path(cu, a - bias, &sub, inl, &ninl, &deep)) {
		have_sub = 1;
		for (uint32_t i = 0; i < ninl; i++)
			if (!call_site(&inl[i], &call_file, &call_line)) {
				call_file = NULL;
				call_line = 0;
			}
	} else {
		/* Not found by the descent (code in a DIE it does not look
		 * into): libdw's own search. */
		n = dwarf_getscopes(cu, a - bias, &scopes);
	}
	while (n > 0) {
		int i = 0, tag = 0;
		for (; i < n; i++) {
			tag = dwarf_tag(&scopes[i]);
			if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
				break;
		}
		if (i == n)
			break;
		if (tag == DW_TAG_subprogram) {
			sub = scopes[i];
			have_sub = 1;
			break;
		}
		if (ninl < MAX_INLINE)
			inl[ninl++] = scopes[i];
		else
			deep = 1;
		if (!call_site(&scopes[i], &call_file, &call_line)) {
			call_file = NULL;
			call_line = 0;
		}
		Dwarf_Die here = scopes[i], *outer = NULL;
		int m = dwarf_getscopes_die(&here, &outer);
		free(scopes);
		scopes = outer;
		/* outer[0] is the inlined instance itself. */
		if (m <= 1) {
			n = 0;
			break;
		}
		n = m - 1;
		memmove(scopes, scopes + 1, (size_t)n * sizeof(*scopes));
	}
	free(scopes);
	if (ninl && !deep) {
		/* The line table's line is the innermost level's; each level's
		 * call site is a line of the level around it. */
		const char *file = out->file;
		uint32_t line = out->line;
		struct sym_inline *v = inl_alloc(s, ninl);
		uint32_t k = ninl;
		for (uint32_t i = 0; v && i < ninl; i++) {
			/* inl[i]: its line is (file, line); where it was
			 * called from is the line of inl[i + 1]. */
			const char *nm = die_name(s, &inl[i]);
			if (nm) {
				struct sym_inline *e = &v[--k];
				int dl = 0;
				e->name = nm;
				e->func_file = dwarf_decl_file(&inl[i]);
				e->func_line = e->func_file && dwarf_decl_line(&inl[i], &dl) == 0 && dl > 0 ? (uint32_t)dl : 0;
				e->file = file;
				e->line = line;
			}
			if (!call_site(&inl[i], &file, &line)) {
				file = NULL;
				line = 0;
			}
		}
		/* Unnamed levels (no abstract origin to name them) are left
		 * out: what they run is shown in the level around them. */
		if (v && k < ninl) {
			out->inl = v + k;
			out->ninl = ninl - k;
		}
	}
	if (ninl) {
		out->file = call_file;
		out->line = call_line;
	}
	if (have_sub) {
		int dl = 0;
		out->func_file = dwarf_decl_file(&sub);
		if (out->func_file && dwarf_decl_line(&sub, &dl) == 0 && dl > 0)
			out->func_line = (uint32_t)dl;
		if (!out->name) {
			const char *nm = die_name(s, &sub);
			if (nm) {
				out->name = nm;
				Dwarf_Addr lo = 0;
				if (dwarf_lowpc(&sub, &lo) == 0 && lo + bias <= a) {
					out->func_start = lo + bias;
					out->sym_offset = a - out->func_start;
				}
			}
		}
	}
}

/* Where the function containing `a` starts, from the unwind information:
 * a stripped object still has one FDE per function, so its unnamed
 * functions keep apart (as object+0xSTART) instead of one name per
 * address. 0 if no FDE covers `a`. */
static uint64_t fde_start(struct symfile *f, uint64_t a)
{
	if (!f->fdes_done) {
		f->fdes_done = 1;
		struct elf_section sec;
		int debug = 0;
		if (!f->elf_path)
			return 0; /* the vDSO names all its functions; a debug file has its symbols */
		if (elf_find_section(f->elf_path, ".eh_frame", &sec) != 0) {
			if (elf_find_section(f->elf_path, ".debug_frame", &sec) != 0)
				return 0;
			debug = 1;
		}
		uint8_t *data = elf_read_section(f->elf_path, &sec);
		if (!data)
			return 0;
		struct cfi_source src = { data, sec.size, sec.addr, 0 };
		if (cfi_fde_ranges(&src, debug, &f->fdes, &f->nfdes) != CFI_OK)
			f->nfdes = 0;
		free(data);
	}
	uint32_t lo = 0, hi = f->nfdes;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (f->fdes[mid][0] <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && a < f->fdes[lo - 1][1] ? f->fdes[lo - 1][0] : 0;
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

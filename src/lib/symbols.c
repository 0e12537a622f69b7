/*
 * symbols.c — see symbols.h. Each distinct object gets its own libdwfl
 * session, reported at load bias 0, so its addresses are the ELF file's
 * own and one session serves every process that mapped the object. A
 * per-object memo keeps repeated addresses (most of a profile's) cheap.
 *
 * An object whose file now has a different build id than the recorded one
 * (reinstalled since) is not trusted: its frames show as object+offset.
 */
#include "symbols.h"
#include "merge.h"
#include "../common/cfi.h"
#include "../common/elfsect.h"

#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* libstdc++'s demangler (linked with -lstdc++). */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

struct memo {
	uint64_t key;           /* vaddr + 1 (0 = empty) | call flag in bit 63 */
	const char *name;
	uint64_t sym_offset;
	const char *file;
	uint32_t line;
};

struct symfile {
	struct symfile *next;
	char *path;
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

struct symbolizer {
	struct symfile *files;
	struct sym_space *spaces;
	struct strnode *strings; /* demangled names */
};

static char *debuginfo_path = NULL; /* libdwfl's default: ":.debug:/usr/lib/debug" */

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
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
	return calloc(1, sizeof(struct symbolizer));
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
		free(f->image);
		free(f->memo);
		free(f->eval);
		free(f);
	}
	for (struct sym_space *sp = s->spaces, *n; sp; sp = n) {
		n = sp->next;
		free(sp->m);
		free(sp);
	}
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
		    !memcmp(f->build_id, m->build_id, m->build_id_len) && f->image_len == m->image_len)
			return f;
	struct symfile *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(m->path))) {
		free(f);
		return NULL;
	}
	if (m->build_id_len <= sizeof(f->build_id)) {
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

static int same_frame(const struct cfi_rules *a, const struct cfi_rules *b)
{
	if (a->cfa.kind != b->cfa.kind || a->cfa.reg != b->cfa.reg || a->cfa.off != b->cfa.off)
		return 0;
	for (int i = 0; i < CFI_NREGS; i++)
		if (a->r[i].kind != b->r[i].kind || a->r[i].off != b->r[i].off || a->r[i].reg != b->r[i].reg)
			return 0;
	return 1;
}

/* Whether the code at [lo, hi) of the file (in .text) has a near jump
 * (jmp rel32 or jcc rel32) whose target is in [tlo, thi). */
static int jumps_into(const uint8_t *text, uint64_t text_addr, uint64_t lo, uint64_t hi, uint64_t tlo, uint64_t thi)
{
	for (uint64_t a = lo; a + 6 <= hi; a++) {
		const uint8_t *p = text + (a - text_addr);
		int32_t rel;
		uint64_t target;
		if (p[0] == 0xe9) {
			memcpy(&rel, p + 1, 4);
			target = a + 5 + (uint64_t)(int64_t)rel;
		} else if (p[0] == 0x0f && (p[1] & 0xf0) == 0x80) {
			memcpy(&rel, p + 2, 4);
			target = a + 6 + (uint64_t)(int64_t)rel;
		} else {
			continue;
		}
		if (target >= tlo && target < thi)
			return 1;
	}
	return 0;
}

/* Finds the eval loop in CPython: its symbols, and when the object has no
 * .symtab (Debian strips it; only the exported _PyEval_EvalFrameDefault is
 * in .dynsym), its unnamed .cold part. gcc moves the eval loop's unlikely
 * paths into a separate FDE that starts with the hot part's frame already
 * set up: the only kind of function whose first instruction has a CFA
 * other than rsp+8. An FDE like that, whose rules equal those that hold in
 * the body of the eval loop, and that the eval loop jumps into, is its
 * cold part. (The same frame layout alone is not enough: Debian's 3.11
 * has two other functions with the same 352-byte frame.) */
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
	if (named_parts || !hot_hi || f->image_len)
		return;
	struct elf_section sec;
	if (elf_find_section(f->path, ".eh_frame", &sec))
		return;
	uint8_t *data = elf_read_section(f->path, &sec);
	if (!data)
		return;
	struct cfi_table t;
	struct cfi_source src = { data, sec.size, sec.addr, 0 };
	int rc = cfi_build_section(&t, &src, 0, NULL);
	free(data);
	if (rc != CFI_OK)
		return;
	/* The rules that hold over most of the hot part: its body. */
	uint32_t best = CFI_NO_RULE;
	uint64_t best_len = 0;
	for (uint32_t i = 0; i + 1 < t.nrows; i++) {
		uint64_t lo = t.base + t.pc[i], hi = t.base + t.pc[i + 1];
		if (lo < hot_lo || hi > hot_hi || t.rule[i] == CFI_NO_RULE)
			continue;
		uint64_t len = 0;
		for (uint32_t j = i; j + 1 < t.nrows; j++)
			if (t.rule[j] == t.rule[i] && t.base + t.pc[j] >= hot_lo && t.base + t.pc[j + 1] <= hot_hi)
				len += t.pc[j + 1] - t.pc[j];
		if (len > best_len)
			best_len = len, best = t.rule[i];
		if (best_len * 2 > hot_hi - hot_lo)
			break;
	}
	struct elf_section tsec;
	uint8_t *text = NULL;
	if (elf_find_section(f->path, ".text", &tsec) == 0 && hot_lo >= tsec.addr && hot_hi <= tsec.addr + tsec.size)
		text = elf_read_section(f->path, &tsec);
	if (best != CFI_NO_RULE && text) {
		const struct cfi_rules *body = &t.rules[best];
		for (uint32_t i = 0; i < t.nfdes; i++) {
			uint64_t lo = t.base + t.fde_pc[i];
			if (lo >= hot_lo && lo < hot_hi)
				continue;
			uint32_t r = cfi_rule_at(&t, lo, NULL);
			if (r == CFI_NO_RULE || !same_frame(&t.rules[r], body) ||
			    (body->cfa.kind == CFA_REG && body->cfa.reg == DW_RSP && body->cfa.off == 8))
				continue;
			/* It runs to the next FDE or the next gap. */
			uint64_t hi = i + 1 < t.nfdes ? t.base + t.fde_pc[i + 1] : t.end;
			for (uint32_t j = 0; j < t.nrows; j++)
				if (t.base + t.pc[j] > lo && t.base + t.pc[j] < hi && t.rule[j] == CFI_NO_RULE) {
					hi = t.base + t.pc[j];
					break;
				}
			if (lo >= tsec.addr && hi <= tsec.addr + tsec.size &&
			    jumps_into(text, tsec.addr, hot_lo, hot_hi, lo, hi))
				add_eval(f, lo, hi);
		}
	}
	free(text);
	cfi_table_free(&t);
}

/* Opens the object on first use. */
static int file_open(struct symfile *f)
{
	if (f->opened)
		return f->ok;
	f->opened = 1;
	int fd = -1;
	if (f->image_len) {
		/* An object with no file (the vDSO): libdwfl reads it from a
		 * memory file holding the recorded image. */
		fd = memfd_create("strata-image", MFD_CLOEXEC);
		if (fd < 0 || write(fd, f->image, f->image_len) != (ssize_t)f->image_len) {
			if (fd >= 0)
				close(fd);
			return 0;
		}
	}
	f->dwfl = dwfl_begin(&callbacks);
	if (!f->dwfl) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	dwfl_report_begin(f->dwfl);
	const char *base = strrchr(f->path, '/');
	/* dwfl takes over fd (closed by dwfl_end). */
	f->mod = dwfl_report_elf(f->dwfl, base ? base + 1 : f->path, f->path, fd, 0, 0);
	dwfl_report_end(f->dwfl, NULL, NULL);
	if (!f->mod)
		return 0;
	if (f->build_id_len) {
		const unsigned char *bits;
		GElf_Addr vaddr;
		int n = dwfl_module_build_id(f->mod, &bits, &vaddr);
		if (n > 0 && ((size_t)n != f->build_id_len || memcmp(bits, f->build_id, f->build_id_len)))
			return 0; /* a different build now lives at this path */
	}
	f->ok = 1;
	if (f->interpreter)
		find_eval(f);
	return 1;
}

static const char *intern_str(struct symbolizer *s, const char *str)
{
	size_t n = strlen(str);
	struct strnode *t = malloc(sizeof(*t) + n + 1);
	if (!t)
		return NULL;
	memcpy(t->s, str, n + 1);
	t->next = s->strings;
	s->strings = t;
	return t->s;
}

static const char *demangle(struct symbolizer *s, const char *name)
{
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
	if (!file_open(f))
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
		return;
	}
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(f->mod, a, &off, &sym, NULL, NULL, NULL);
	if (name && *name) {
		out->name = demangle(sp->owner, name);
		out->sym_offset = off + (call ? 1 : 0);
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
	if (e) {
		e->key = (a + 1) | (call ? 1ull << 63 : 0);
		e->name = out->name;
		e->sym_offset = out->sym_offset;
		e->file = out->file;
		e->line = out->line;
		f->memo_n++;
	}
}

/*
 * test_native_model.c — native frames in the profile model (native.c,
 * stacks.c): files built with the real encoders whose stacks hold native
 * addresses of the fixture object (built with -g, and a stripped copy) and
 * of Debian's python3.11, with every answer known by construction: the
 * merged order, function and frame fields (name, file, first line, line,
 * module, ELF address), the eval loop and interpreter frames hidden or
 * kept, "[native stack incomplete]" where the walk stopped, the native
 * sample counts, one frame per address across stacks, unnamed functions
 * of a stripped object named object+0xSTART, and PLT stubs NAME@plt.
 *
 * usage: test_native_model FIXTURE.so   (FIXTURE_stripped.so beside it)
 */
#include "test.h"

#include <dlfcn.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <fcntl.h>
#include <unistd.h>

#include "synth.h"
#include "../../src/common/elfsect.h"
#include "../../src/lib/profile.h"
#include "../../src/lib/symbols.h"

#define PYTHON "/usr/bin/python3.11"
#define BASE1 0x7f1000000000ull /* where stream 1 "loaded" the fixture */
#define BASE2 0x7f2000000000ull /* and stream 2 the stripped copy */

static char fixture[4096], stripped[4096];
static struct elf_section text, ptext;
static uint64_t exec_lo; /* the executable segment starts with .plt, before .text */
static uint64_t bias; /* of the dlopen'ed fixture, to turn dlsym into ELF addresses */
static uint64_t a_leaf, a_leaf_line, a_spin, a_big, a_libc, a_hidden, a_getpid_plt; /* ELF addresses */
static uint64_t a_inl_loop; /* in fixture_inlines, in the loop of the function inlined twice into it */
static int inl_outer, inl_mid, inl_inner;
static uint64_t a_eval, a_pymain;    /* python3.11 (not PIE: ELF = run time) */
static int leaf_line, leaf_decl;

static int source_line(const char *marker)
{
	FILE *f = fopen(SRCDIR "/tests/unit/fixture_native.cc", "r");
	char line[512];
	int n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, marker)) {
			fclose(f);
			return n;
		}
	}
	if (f)
		fclose(f);
	return -1;
}

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_name && strstr(info->dlpi_name, "fixture_native.so")) {
		bias = info->dlpi_addr;
		return 1;
	}
	return 0;
}

/* The address of `name` in an ELF file's symbol table of `type`
 * (SHT_DYNSYM or SHT_SYMTAB), 0 if absent. */
static uint64_t elf_sym(const char *path, const char *name, uint32_t type)
{
	int fd = open(path, O_RDONLY);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	uint64_t addr = 0;
	for (Elf_Scn *scn = e ? elf_nextscn(e, NULL) : NULL; scn && !addr; scn = elf_nextscn(e, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n = gelf_getsym(d, (int)i, &s) ? elf_strptr(e, sh.sh_link, s.st_name) : NULL;
			if (n && !strcmp(n, name) && s.st_value) {
				addr = s.st_value;
				break;
			}
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	return addr;
}

/* The PLT stub through which the fixture calls getpid: relocation i of
 * .rela.plt is stub i+1 of .plt (after PLT0), or stub i of .plt.sec. */
static uint64_t getpid_plt(const char *path)
{
	int fd = open(path, O_RDONLY);
	Elf *e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	size_t shstr;
	uint64_t plt = 0, plt_sec = 0, addr = 0;
	Elf_Scn *rela = NULL;
	GElf_Shdr rsh = { 0 };
	if (!e || elf_getshdrstrndx(e, &shstr))
		goto out;
	for (Elf_Scn *scn = elf_nextscn(e, NULL); scn; scn = elf_nextscn(e, scn)) {
		GElf_Shdr sh;
		const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(e, shstr, sh.sh_name) : NULL;
		if (!n)
			continue;
		if (!strcmp(n, ".plt"))
			plt = sh.sh_addr;
		else if (!strcmp(n, ".plt.sec"))
			plt_sec = sh.sh_addr;
		else if (!strcmp(n, ".rela.plt"))
			rela = scn, rsh = sh;
	}
	if (!rela || !plt)
		goto out;
	Elf_Data *rd = elf_getdata(rela, NULL), *sd = elf_getdata(elf_getscn(e, rsh.sh_link), NULL);
	GElf_Shdr dsh;
	gelf_getshdr(elf_getscn(e, rsh.sh_link), &dsh);
	for (size_t i = 0; rd && sd && i < rsh.sh_size / rsh.sh_entsize; i++) {
		GElf_Rela r;
		GElf_Sym s;
		if (!gelf_getrela(rd, (int)i, &r) || !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &s))
			continue;
		const char *n = elf_strptr(e, dsh.sh_link, s.st_name);
		if (n && !strcmp(n, "getpid")) {
			addr = plt_sec ? plt_sec + 16 * i : plt + 16 * (i + 1);
			break;
		}
	}
out:
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	return addr;
}

static int setup(const char *so)
{
	elf_version(EV_CURRENT);
	snprintf(fixture, sizeof(fixture), "%s", so);
	snprintf(stripped, sizeof(stripped), "%.*s_stripped.so", (int)(strlen(so) - 3), so);
	void *h = dlopen(so, RTLD_NOW);
	if (!h || elf_find_section(so, ".text", &text) || elf_find_section(stripped, ".text", &ptext) ||
	    access(PYTHON, R_OK)) {
		fprintf(stderr, "test_native_model: needs %s, %s and %s\n", so, stripped, PYTHON);
		return -1;
	}
	dl_iterate_phdr(find_cb, NULL);
	a_leaf = (uint64_t)(uintptr_t)dlsym(h, "fixture_leaf") - bias;
	a_spin = (uint64_t)(uintptr_t)dlsym(h, "_ZN14strata_fixture6Widget4spinEi") - bias;
	a_big = (uint64_t)(uintptr_t)dlsym(h, "fixture_bigframe") - bias;
	a_libc = (uint64_t)(uintptr_t)dlsym(h, "fixture_calls_libc") - bias;
	a_hidden = elf_sym(so, "_ZL14fixture_hiddeni", SHT_SYMTAB);
	a_getpid_plt = getpid_plt(stripped);
	a_eval = elf_sym(PYTHON, "_PyEval_EvalFrameDefault", SHT_DYNSYM);
	a_pymain = elf_sym(PYTHON, "Py_BytesMain", SHT_DYNSYM);
	struct elf_section plt;
	exec_lo = elf_find_section(so, ".plt", &plt) == 0 && plt.addr < text.addr ? plt.addr : text.addr;
	leaf_line = source_line("LEAF_LINE");
	leaf_decl = source_line("int fixture_leaf(int n)");
	/* An address of fixture_leaf on the marked line (the symbolizer's own
	 * test checks that one exists). */
	struct symbolizer *s = sym_new();
	struct sym_space *sp = sym_space_new(s);
	struct rec_module m = { .start = text.addr, .end = text.addr + text.size, .path = fixture };
	sym_space_add(sp, &m);
	for (uint64_t a = a_leaf; a < a_leaf + 64 && !a_leaf_line; a++) {
		struct sym_info si;
		sym_lookup(sp, a, 0, &si);
		if ((int)si.line == leaf_line)
			a_leaf_line = a;
	}
	inl_outer = source_line("INL_OUTER_LINE");
	inl_mid = source_line("INL_MID_LINE");
	inl_inner = source_line("INL_INNER_LINE");
	uint64_t a_inl = (uint64_t)(uintptr_t)dlsym(h, "fixture_inlines") - bias;
	for (uint64_t a = a_inl; a < a_inl + 48 && !a_inl_loop; a++) {
		struct sym_info si;
		sym_lookup(sp, a, 0, &si);
		if (si.ninl == 2 && (int)si.inl[1].line == inl_inner)
			a_inl_loop = a;
	}
	sym_free(s);
	if (!a_leaf_line || !a_inl_loop || !a_eval || !a_pymain || !a_getpid_plt || !a_hidden || leaf_line < 0 || leaf_decl < 0) {
		fprintf(stderr, "test_native_model: fixture addresses not found\n");
		return -1;
	}
	return 0;
}

/* ---- the file ------------------------------------------------------------- */

static const uint8_t lt[] = { 0, 1 }; /* every instruction on the first line + 1 */

static void proc_recs(struct synth *s, uint32_t pid, const char *exe_so, const struct elf_section *t, uint64_t base)
{
	char *argv[] = { "python3", "x.py" };
	struct rec_process pr = { .pid = pid, .ppid = 1, .start_mono_ns = 1, .python_version = "3.11.2",
				  .executable = PYTHON, .argc = 2, .argv = argv, .rate_hz = 1000,
				  .period_ns = 1000000 };
	rec_put_process(&s->recs, &pr);
	struct rec_thread th = { .tid = pid, .start_mono_ns = 1, .flags = THREAD_MAIN, .name = "MainThread" };
	rec_put_thread(&s->recs, &th);
	struct rec_module py = { .start = 0x400000, .end = 0x400000 + (64u << 20), .path = PYTHON };
	rec_put_module(&s->recs, &py);
	struct rec_module fx = { .start = base + exec_lo, .end = base + t->addr + t->size, .bias = base,
				 .path = (char *)exe_so };
	rec_put_module(&s->recs, &fx);
	struct rec_code c0 = { .index = 0, .firstlineno = 1, .linetable_fmt = LT_LNOTAB, .filename = "x.py",
			       .name = "outer", .qualname = "outer", .linetable = (uint8_t *)lt,
			       .linetable_len = sizeof(lt) };
	struct rec_code c1 = c0;
	c1.index = 1;
	c1.firstlineno = 10;
	c1.name = c1.qualname = "cb";
	rec_put_code(&s->recs, &c0);
	rec_put_code(&s->recs, &c1);
}

static void put_stack(struct synth *s, uint32_t idx, uint32_t flags, uint32_t npy, const uint32_t *codes,
		      uint32_t nn, const uint64_t *nat)
{
	struct rec_pyframe py[8];
	for (uint32_t i = 0; i < npy; i++)
		py[i] = (struct rec_pyframe){ .code = codes[i], .lasti = 0, .flags = PYF_ENTRY };
	struct rec_stack r = { .index = idx, .flags = flags, .npy = npy, .py = py, .nnative = nn,
			       .native = (uint64_t *)nat };
	rec_put_stack(&s->recs, &r);
}

static void put_samples(struct synth *s, uint32_t tid, uint32_t stack, int n)
{
	for (int i = 0; i < n; i++) {
		struct rec_sample r = { .tid = tid, .dt_ns = 1000000, .stack = stack, .weight = 1 };
		rec_put_sample(&s->recs, &r);
	}
}

static struct profile *build(int keep)
{
	struct synth s;
	synth_init(&s, STRATA_FMT_MAJOR, STRATA_FMT_MINOR);
	/* Stream 1: the fixture with DWARF. Native addresses leaf first: the
	 * interrupted pc, then return addresses. */
	proc_recs(&s, 100, fixture, &text, BASE1);
	uint32_t outer[] = { 0 }, cb_outer[] = { 1, 0 };
	/* outer -> (eval) -> Widget::spin -> fixture_leaf */
	uint64_t s0[] = { BASE1 + a_leaf_line, BASE1 + a_spin + 4, a_eval + 0x40, a_pymain + 0x10 };
	put_stack(&s, 0, 0, 1, outer, 4, s0);
	/* outer -> fixture_bigframe (C) -> cb (a callback) -> fixture_leaf */
	uint64_t s1[] = { BASE1 + a_leaf_line, a_eval + 0x40, BASE1 + a_big + 4, a_eval + 0x40, a_pymain + 0x10 };
	put_stack(&s, 1, 0, 2, cb_outer, 5, s1);
	/* The walk stopped after the leaf. */
	uint64_t s2[] = { BASE1 + a_leaf_line };
	put_stack(&s, 2, STACK_NATIVE_FAILED, 1, outer, 1, s2);
	put_samples(&s, 100, 0, 3);
	put_samples(&s, 100, 1, 2);
	put_samples(&s, 100, 2, 1);
	synth_chunk(&s, 1, CHUNK_LAST);
	/* Stream 2: another process with the stripped copy elsewhere; its
	 * stack index 0 is not stream 1's. */
	proc_recs(&s, 200, stripped, &ptext, BASE2);
	uint64_t s3[] = { BASE2 + a_getpid_plt, BASE2 + a_hidden + 4, BASE2 + a_libc + 4, a_eval + 0x40,
			  a_pymain + 0x10 };
	put_stack(&s, 0, 0, 1, outer, 5, s3);
	put_samples(&s, 200, 0, 4);
	synth_chunk(&s, 2, CHUNK_LAST);
	/* Stream 3: the fixture again, in a function with two levels of
	 * inlined code, interrupted in the inner one's loop. */
	proc_recs(&s, 300, fixture, &text, BASE1);
	uint64_t s4[] = { BASE1 + a_inl_loop, a_eval + 0x40, a_pymain + 0x10 };
	put_stack(&s, 0, 0, 1, outer, 3, s4);
	put_samples(&s, 300, 0, 2);
	synth_chunk(&s, 3, CHUNK_LAST);

	char path[64], err[256];
	struct profile *p = NULL;
	if (synth_write(&s, path) == 0) {
		struct load_opts o = { .keep_interpreter = keep };
		p = profile_load(path, &o, err, sizeof(err));
		if (!p)
			fprintf(stderr, "    load failed: %s\n", err);
		unlink(path);
	}
	synth_free(&s);
	return p;
}

/* The stack of the first sample of thread `tid` that used `nth` distinct
 * node, as "name;name;..." root first. */
static void stack_text(const struct profile *p, uint64_t sample, char *out, size_t n)
{
	uint32_t fr[64];
	uint32_t d = profile_stack(p, p->samples[sample].node, fr, 64);
	out[0] = 0;
	for (uint32_t i = 0; i < d && i < 64; i++) {
		size_t l = strlen(out);
		snprintf(out + l, n - l, "%s%s", i ? ";" : "", p->funcs[p->frames[fr[i]].func].name);
	}
}

static const struct pframe *leaf(const struct profile *p, uint64_t sample)
{
	return &p->frames[p->nodes[p->samples[sample].node].frame];
}

static void test_merged_stacks(void)
{
	struct profile *p = build(0);
	if (!CHECK(p != NULL))
		return;
	CHECK_U64(p->nsamples, 12);
	char buf[1024], want[256];
	stack_text(p, 0, buf, sizeof(buf));
	CHECK_STR(buf, "outer;strata_fixture::Widget::spin(int);fixture_leaf");
	stack_text(p, 3, buf, sizeof(buf));
	CHECK_STR(buf, "outer;fixture_bigframe;cb;fixture_leaf");
	stack_text(p, 5, buf, sizeof(buf));
	CHECK_STR(buf, "outer;[native stack incomplete];fixture_leaf");
	/* The stripped copy: its function has no symbol, its PLT stub does. */
	const char *sbase = strrchr(stripped, '/') + 1;
	snprintf(want, sizeof(want), "outer;fixture_calls_libc;%s+0x%" PRIx64 ";getpid@plt", sbase, a_hidden);
	stack_text(p, 6, buf, sizeof(buf));
	CHECK_STR(buf, want);

	/* Inlined functions are frames of their own, outermost first, at the
	 * same address, each at its line, linked to the frame around it. */
	stack_text(p, 10, buf, sizeof(buf));
	CHECK_STR(buf, "outer;fixture_inlines;fixture_inl_mid;fixture_inl_inner");
	{
		uint32_t ifr[8];
		if (CHECK(profile_stack(p, p->samples[10].node, ifr, 8) == 4)) {
			const struct pframe *o = &p->frames[ifr[1]], *m = &p->frames[ifr[2]], *in = &p->frames[ifr[3]];
			CHECK_EQ(o->line, inl_outer);
			CHECK_EQ(m->line, inl_mid);
			CHECK_EQ(in->line, inl_inner);
			CHECK_U64(o->addr, a_inl_loop);
			CHECK_U64(m->addr, a_inl_loop);
			CHECK_U64(in->addr, a_inl_loop);
			CHECK_EQ(o->inlined_into, PNONE);
			CHECK_EQ(m->inlined_into, ifr[1]);
			CHECK_EQ(in->inlined_into, ifr[2]);
			CHECK_EQ(p->frames[ifr[0]].inlined_into, PNONE);
			CHECK_STR(p->funcs[in->func].module, fixture);
			CHECK(strstr(p->funcs[in->func].file, "fixture_native.cc") != NULL);
			CHECK_EQ(p->funcs[in->func].line, source_line("int fixture_inl_inner(int n)"));
		}
	}

	/* The leaf frame: every field. */
	const struct pframe *f = leaf(p, 0);
	const struct pfunc *fn = &p->funcs[f->func];
	CHECK_EQ(fn->kind, PK_NATIVE);
	CHECK_STR(fn->name, "fixture_leaf");
	CHECK_STR(fn->module, fixture);
	CHECK(strstr(fn->file, "fixture_native.cc") != NULL);
	CHECK_EQ(fn->line, leaf_decl);
	CHECK_EQ(f->line, leaf_line);
	CHECK_U64(f->addr, a_leaf_line);
	/* One frame for one address, whatever stack it is in. */
	CHECK_EQ(p->nodes[p->samples[0].node].frame, p->nodes[p->samples[3].node].frame);
	/* A return address is the frame's address as recorded. */
	uint32_t fr[8];
	CHECK_EQ(profile_stack(p, p->samples[0].node, fr, 8), 3);
	CHECK_U64(p->frames[fr[1]].addr, a_spin + 4);
	CHECK_EQ(p->funcs[p->frames[fr[0]].func].kind, PK_PYTHON);
	CHECK(p->funcs[p->frames[fr[0]].func].module == NULL);
	/* The PLT stub in the other process, at its own ELF address. */
	CHECK_U64(leaf(p, 6)->addr, a_getpid_plt);
	CHECK_STR(p->funcs[leaf(p, 6)->func].module, stripped);
	CHECK_STR(p->funcs[leaf(p, 6)->func].file, "");

	/* Nothing of the interpreter is left on any stack: the eval loop is
	 * replaced, Py_BytesMain is below the outermost Python frame. */
	for (uint32_t i = 1; i < p->nnodes; i++) {
		const struct pfunc *nf = &p->funcs[p->frames[p->nodes[i].frame].func];
		CHECK(!nf->module || strcmp(nf->module, PYTHON) != 0);
	}
	CHECK_U64(p->native.samples, 12);
	CHECK_U64(p->native.failed, 1);
	CHECK_U64(p->native.truncated, 0);
	CHECK_U64(p->native.mismatch, 0);

	/* Aggregation sees native functions like any other. */
	struct agg_filter flt = { 0 };
	struct agg *a = profile_aggregate(p, &flt, 0);
	if (CHECK(a != NULL)) {
		CHECK_STR(p->funcs[a->funcs[0].func].name, "fixture_leaf");
		CHECK_U64(a->funcs[0].self[0], 6);
		int seen = 0;
		for (uint32_t i = 0; i < a->nlines; i++)
			if (a->lines[i].func == f->func && a->lines[i].line == (uint32_t)leaf_line)
				seen = CHECK(a->lines[i].self[0] == 6);
		CHECK(seen);
		agg_free(a);
	}
	profile_free(p);
}

static void test_keep_interpreter(void)
{
	struct profile *p = build(1);
	if (!CHECK(p != NULL))
		return;
	char buf[1024];
	stack_text(p, 0, buf, sizeof(buf));
	CHECK_STR(buf, "Py_BytesMain;_PyEval_EvalFrameDefault;outer;strata_fixture::Widget::spin(int);fixture_leaf");
	stack_text(p, 3, buf, sizeof(buf));
	CHECK_STR(buf, "Py_BytesMain;_PyEval_EvalFrameDefault;outer;fixture_bigframe;_PyEval_EvalFrameDefault;cb;"
		       "fixture_leaf");
	uint32_t fr[8];
	profile_stack(p, p->samples[0].node, fr, 8);
	CHECK_STR(p->funcs[p->frames[fr[1]].func].module, PYTHON);
	CHECK_U64(p->frames[fr[1]].addr, a_eval + 0x40);
	profile_free(p);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_native_model FIXTURE.so\n");
		return 2;
	}
	if (setup(argv[1]))
		return 1;
	RUN(test_merged_stacks);
	RUN(test_keep_interpreter);
	return test_summary();
}

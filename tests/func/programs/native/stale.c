/* A C extension that runs a Python callable under a live frame whose
 * stack holds return addresses into the dynamic loader and into malloc
 * that are not frames (issue 21): the stale words that made a ptrace
 * attach refuse a thread forever when every word of its stack was taken
 * for a return address.
 *
 * run(fn) first calls down a chain of frames that dlopen()s, malloc()s and
 * returns (real calls into ld.so and the allocator, whose return addresses
 * stay in the memory below run's frame), then calls fn from a frame that
 * reserves that memory as a local array and never writes it, but for a
 * few slots it sets on purpose to an address inside malloc and one inside
 * the loader (in case a compiler or libc leaves none of the first kind).
 * counts() says how many such words the array held when fn was called:
 * (into the loader, into malloc), the planted ones included.
 * fgets_stdin() waits for a line inside C stdio's fgets (a real frame
 * holding a lock); spin_without_cfi() spins in anonymous code (no unwind
 * information, as JIT code) under the words. Built by the tests as
 * strata_stale_ext. */
#define _GNU_SOURCE 1
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SLOTS 4096 /* 32 KiB */

static uintptr_t ld_lo, ld_hi;          /* the loader's executable segment */
static uintptr_t malloc_lo, malloc_hi;  /* malloc's code */
static int n_ld, n_malloc;

static int find_ld(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strncmp(base, "ld-linux", 8) && strncmp(base, "ld-2.", 5) && strncmp(base, "ld64.so", 7))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			ld_lo = info->dlpi_addr + ph->p_vaddr;
			ld_hi = ld_lo + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

static void find_ranges(void)
{
	if (!ld_lo)
		dl_iterate_phdr(find_ld, NULL);
	if (!malloc_lo) {
		Dl_info di;
		const ElfW(Sym) *sym = NULL;
		void *m = dlsym(RTLD_DEFAULT, "malloc");
		if (m && dladdr1(m, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
			malloc_lo = (uintptr_t)di.dli_saddr;
			malloc_hi = malloc_lo + sym->st_size;
		} else if (m) {
			malloc_lo = (uintptr_t)m;
			malloc_hi = malloc_lo + 64;
		}
	}
}

/* Down `n` frames, then calls into the loader and the allocator, and back. */
__attribute__((noinline)) static uintptr_t deep(int n)
{
	volatile char pad[200];
	pad[0] = (char)n;
	if (n > 0)
		return deep(n - 1) + (uintptr_t)pad[0];
	void *h = dlopen("libm.so.6", RTLD_NOW);
	if (h)
		dlclose(h);
	uintptr_t s = 0;
	for (int i = 0; i < 64; i++) {
		void *p = malloc((size_t)(16 << (i % 17)));
		s += (uintptr_t)p;
		free(p);
	}
	return s;
}

/* fn() (or, with code, code() without the GIL) from a frame whose
 * reserved, never written array holds the words. */
__attribute__((noinline)) static PyObject *under_stale(PyObject *fn, void (*code)(void))
{
	volatile uintptr_t slot[SLOTS];
	/* Planted: return-address-like words (a few bytes into the function). */
	if (ld_lo)
		slot[SLOTS / 3] = ld_lo + (ld_hi - ld_lo) / 2;
	if (malloc_lo)
		slot[SLOTS / 2] = malloc_lo + (malloc_hi - malloc_lo) / 2;
	int nl = 0, nm = 0;
	for (int i = 0; i < SLOTS; i++) {
		uintptr_t w = slot[i];
		nl += w >= ld_lo && w < ld_hi;
		nm += w >= malloc_lo && w < malloc_hi;
	}
	n_ld = nl;
	n_malloc = nm;
	PyObject *r;
	if (code) {
		Py_BEGIN_ALLOW_THREADS
		code();
		Py_END_ALLOW_THREADS
		r = Py_None;
		Py_INCREF(r);
	} else {
		r = PyObject_CallObject(fn, NULL);
	}
	/* The array stays live (and unwritten) until fn returns. */
	if (slot[SLOTS / 3] == 1)
		n_ld++;
	return r;
}

static PyObject *run(PyObject *self, PyObject *fn)
{
	(void)self;
	find_ranges();
	volatile uintptr_t s = deep(40);
	(void)s;
	return under_stale(fn, NULL);
}

/* Spins forever in code with no unwind information (a page of anonymous
 * memory, as JIT code is), under the stale words: a stack the walk cannot
 * get through. */
static PyObject *spin_without_cfi(PyObject *self, PyObject *noargs)
{
	(void)self;
	(void)noargs;
	static const unsigned char loop[] = { 0xf3, 0x90, 0xeb, 0xfc }; /* 1: pause; jmp 1b */
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		return PyErr_SetFromErrno(PyExc_OSError);
	memcpy(page, loop, sizeof(loop));
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC))
		return PyErr_SetFromErrno(PyExc_OSError);
	find_ranges();
	volatile uintptr_t s = deep(40);
	(void)s;
	return under_stale(NULL, (void (*)(void))page);
}

static PyObject *counts(PyObject *self, PyObject *noargs)
{
	(void)self;
	(void)noargs;
	return Py_BuildValue("(ii)", n_ld, n_malloc);
}

/* A thread that really is inside a lock holder: C stdio's fgets() keeps
 * stdin's FILE locked while it waits for a line. The line is returned. */
static PyObject *fgets_stdin(PyObject *self, PyObject *noargs)
{
	(void)self;
	(void)noargs;
	char line[256] = "";
	char *r;
	Py_BEGIN_ALLOW_THREADS
	r = fgets(line, sizeof(line), stdin);
	Py_END_ALLOW_THREADS
	return PyUnicode_FromString(r ? line : "");
}

static PyMethodDef methods[] = {
	{ "spin_without_cfi", spin_without_cfi, METH_NOARGS, "spins forever in anonymous code, under the words" },
	{ "fgets_stdin", fgets_stdin, METH_NOARGS, "a line of stdin read with C stdio's fgets" },
	{ "run", run, METH_O, "run(fn): fn() under a frame holding stale words into ld.so and malloc" },
	{ "counts", counts, METH_NOARGS, "(words into the loader, words into malloc) in that frame" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef mod = { PyModuleDef_HEAD_INIT, "strata_stale_ext", NULL, -1, methods };

PyMODINIT_FUNC PyInit_strata_stale_ext(void) { return PyModule_Create(&mod); }

/*
 * pycode.c — code objects: what the writer learns of one (file, names,
 * line table), read whole through a fault-proof reader; the hook that
 * keeps a sampled one's contents at its death; and, for the reader, the
 * qualified name before 3.11 (srcqual.h). See py-internal.h.
 *
 * Separate from pyframes.c because none of it runs in the signal handler
 * or needs the frame accessors: it reads the code object's own layout
 * (CODE_LINETABLE, CODE_QUALNAME) from the writer's thread, or from the
 * deallocator with the GIL held.
 */
#include "py-internal.h"

#include <stdlib.h>
#include <string.h>

#include "srcqual.h"

/* ===== code objects ==================================================== */

#define MAX_STR_CHARS 4096
#define MAX_LINETABLE (1u << 20)

/* Code objects are read whole through a reader: the fault-proof one
 * (safe_read in-process, or the target's memory from outside), or, in the
 * deallocation hook, which runs with the GIL on an object that is still
 * alive, directly. */
typedef int (*reader_fn)(void *dst, const void *src, size_t n);

static int rd_safe(void *dst, const void *src, size_t n)
{
#ifdef STRATA_REMOTE
	return RENV.read(RENV.ctx, dst, (uint64_t)(uintptr_t)src, n);
#else
	return core->safe_read(dst, (uint64_t)(uintptr_t)src, n);
#endif
}

#ifndef STRATA_REMOTE
static int rd_direct(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
	return 0;
}
#endif

/* Appends the UTF-8 encoding of code point c. */
static size_t utf8_put(char *o, uint32_t c)
{
	if (c < 0x80) {
		o[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xC0 | c >> 6);
		o[1] = (char)(0x80 | (c & 0x3F));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xE0 | c >> 12);
		o[1] = (char)(0x80 | (c >> 6 & 0x3F));
		o[2] = (char)(0x80 | (c & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | c >> 18);
	o[1] = (char)(0x80 | (c >> 12 & 0x3F));
	o[2] = (char)(0x80 | (c >> 6 & 0x3F));
	o[3] = (char)(0x80 | (c & 0x3F));
	return 4;
}

/* Reads a str object of the target into a new UTF-8 string. */
static char *read_str(reader_fn rd, PyObject *addr)
{
	PyCompactUnicodeObject u;
	PyTypeObject *tp;
	if (!addr || rd(&tp, &addr->ob_type, sizeof(tp)) || tp != T_UNICODE)
		return NULL;
	if (rd(&u, addr, sizeof(u)))
		return NULL;
	Py_ssize_t len = u._base.length;
	if (len < 0 || len > MAX_STR_CHARS)
		return NULL;
	unsigned kind = u._base.state.kind;
	const void *data;
	if (u._base.state.compact)
		data = u._base.state.ascii ? (const char *)addr + sizeof(PyASCIIObject)
					   : (const char *)addr + sizeof(PyCompactUnicodeObject);
	else {
		PyUnicodeObject full;
		if (rd(&full, addr, sizeof(full)))
			return NULL;
		data = full.data.any;
	}
	if (kind != 1 && kind != 2 && kind != 4)
		return NULL;
	size_t bytes = (size_t)len * kind;
	uint8_t *raw = malloc(bytes + 1);
	char *s = malloc((size_t)len * 4 + 1);
	if (!raw || !s || (bytes && rd(raw, data, bytes))) {
		free(raw);
		free(s);
		return NULL;
	}
	size_t o = 0;
	for (Py_ssize_t i = 0; i < len; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ? ((uint16_t *)raw)[i] : ((uint32_t *)raw)[i];
		if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			c = 0xFFFD; /* lone surrogates are not UTF-8 */
		o += utf8_put(s + o, c);
	}
	s[o] = 0;
	free(raw);
	return s;
}

static uint8_t *read_bytes(reader_fn rd, PyObject *addr, size_t *len)
{
	PyBytesObject b;
	PyTypeObject *tp;
	*len = 0;
	if (!addr || rd(&tp, &addr->ob_type, sizeof(tp)) || tp != T_BYTES)
		return NULL;
	if (rd(&b, addr, offsetof(PyBytesObject, ob_sval)))
		return NULL;
	Py_ssize_t n = b.ob_base.ob_size;
	if (n < 0 || (size_t)n > MAX_LINETABLE)
		return NULL;
	uint8_t *p = malloc((size_t)n + 1);
	if (!p || (n && rd(p, (const char *)addr + offsetof(PyBytesObject, ob_sval), (size_t)n))) {
		free(p);
		return NULL;
	}
	*len = (size_t)n;
	return p;
}

static int read_code_with(reader_fn rd, uint64_t addr, struct strata_codeinfo *out)
{
	PyCodeObject co;
	memset(out, 0, sizeof(*out));
	if (rd(&co, (void *)(uintptr_t)addr, sizeof(co)) || ((PyObject *)&co)->ob_type != T_CODE)
		return -1;
	out->firstlineno = co.co_firstlineno > 0 ? (uint32_t)co.co_firstlineno : 0;
	out->flags = (uint32_t)co.co_flags;
	out->filename = read_str(rd, co.co_filename);
	out->name = read_str(rd, co.co_name);
	out->qualname = read_str(rd, CODE_QUALNAME(&co));
	out->linetable = read_bytes(rd, CODE_LINETABLE(&co), &out->linetable_len);
	if (!out->filename || !out->name) {
		free(out->filename);
		free(out->name);
		free(out->qualname);
		free(out->linetable);
		memset(out, 0, sizeof(*out));
		return -1;
	}
	return 0;
}

/* Before 3.11 there is no co_qualname: rebuild it from the source, reading
 * the file if need be (writer) or only if already cached (the deallocation
 * hook, which must not do I/O while it holds the GIL). */
static void fill_qualname(struct strata_codeinfo *ci, int allow_io)
{
	if (PY_VERSION_HEX < 0x030B0000 && !ci->qualname)
		ci->qualname = srcqual_lookup(ci->filename, ci->firstlineno, ci->name, allow_io);
}

char *py_read_strobj(uint64_t addr) { return read_str(rd_safe, (PyObject *)(uintptr_t)addr); }

int py_read_code(uint64_t addr, struct strata_codeinfo *out)
{
	int rc = read_code_with(rd_safe, addr, out);
	if (rc == 0)
		fill_qualname(out, 1);
	return rc;
}

#ifndef STRATA_REMOTE
/* ===== code object deaths ============================================= */

/* The writer resolves code objects a few milliseconds after they were
 * sampled; module bodies and exec() code are often freed by then. Wrapping
 * the code type's deallocator lets the agent keep what it needs of a
 * sampled code object at the moment it dies. */
static destructor orig_code_dealloc;
static int (*death_wanted)(uint64_t);
static void (*death_cb)(uint64_t, struct strata_codeinfo *);

static void strata_code_dealloc(PyObject *op)
{
	uint64_t addr = (uint64_t)(uintptr_t)op;
	if (death_cb && death_wanted(addr)) {
		struct strata_codeinfo ci;
		/* Before 3.11 the qualified name is rebuilt from the source by
		 * the helper (this runs with the GIL held: no file reads). */
		if (read_code_with(rd_direct, addr, &ci) == 0)
			death_cb(addr, &ci);
	}
	orig_code_dealloc(op);
}

int py_hook_code_death(int (*wanted)(uint64_t), void (*on_death)(uint64_t, struct strata_codeinfo *))
{
	death_wanted = wanted;
	death_cb = on_death;
	if (!orig_code_dealloc) {
		orig_code_dealloc = PyCode_Type.tp_dealloc;
		PyCode_Type.tp_dealloc = strata_code_dealloc;
	}
	return 0;
}
#else /* STRATA_REMOTE */

char *rp_qualname(const char *filename, uint32_t firstlineno, const char *name)
{
	if (PY_VERSION_HEX >= 0x030B0000 || !filename || !name)
		return NULL;
	return srcqual_lookup(filename, firstlineno, name, 1);
}
#endif

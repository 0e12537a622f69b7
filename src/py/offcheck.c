/*
 * offcheck.c — see offcheck.h.
 */
#include "offcheck.h"

#include <stdio.h>
#include <string.h>

/* The head of _Py_DebugOffsets, the same in 3.13, 3.14 and 3.15 (and in
 * free-threaded builds): char cookie[8]; uint64_t version; uint64_t
 * free_threaded. */
#define OC_COOKIE "xdebugpy"
#define OC_VERSION_AT 8
#define OC_FT_AT 16
#define OC_HEAD 24

static uint64_t u64_at(const void *table, size_t at)
{
	uint64_t v;
	memcpy(&v, (const char *)table + at, sizeof(v));
	return v;
}

void offcheck_version(uint32_t hex, char *buf, size_t n)
{
	unsigned level = hex >> 4 & 0xF, serial = hex & 0xF;
	const char *tag = level == 0xA ? "a" : level == 0xB ? "b" : level == 0xC ? "rc" : "";
	if (*tag)
		snprintf(buf, n, "%u.%u.%u%s%u", hex >> 24 & 0xFF, hex >> 16 & 0xFF, hex >> 8 & 0xFF, tag, serial);
	else
		snprintf(buf, n, "%u.%u.%u", hex >> 24 & 0xFF, hex >> 16 & 0xFF, hex >> 8 & 0xFF);
}

int offcheck_run(const struct offcheck_build *b, const void *table, size_t len, const char *exe, char *why,
		 size_t n)
{
	char built[32], running[32];
	offcheck_version(b->version_hex, built, sizeof(built));
	if (!exe || !*exe)
		exe = "/path/to/python";
	if (!table || len < OC_HEAD || memcmp(table, OC_COOKIE, 8) != 0) {
		snprintf(why, n, "the interpreter does not start _PyRuntime with CPython's debug offsets "
			 "(cookie \"" OC_COOKIE "\"), so the agent module for Python %s cannot check that it "
			 "reads this interpreter right; this process is not profiled. Build one with: make PYTHONS=%s",
			 built, exe);
		return -1;
	}
	uint32_t hex = (uint32_t)u64_at(table, OC_VERSION_AT);
	offcheck_version(hex, running, sizeof(running));
	if (u64_at(table, OC_FT_AT) || b->free_threaded) {
		snprintf(why, n, "Python %s is a free-threaded build (Py_GIL_DISABLED), which strata does "
			 "not support; this process is not profiled", running);
		return -1;
	}
	if (hex >> 16 != b->version_hex >> 16) {
		snprintf(why, n, "the agent module for Python %s was loaded into Python %s; this process "
			 "is not profiled", built, running);
		return -1;
	}
	for (size_t i = 0; i < b->nfields; i++) {
		const struct offcheck_field *f = &b->fields[i];
		/* A table shorter than the module's own is another layout of
		 * the table itself: a mismatch like any other. */
		uint64_t have = (size_t)f->at + 8 <= len ? u64_at(table, f->at) : UINT64_MAX;
		if (have == f->compiled)
			continue;
		char hs[32];
		if (have == UINT64_MAX)
			snprintf(hs, sizeof(hs), "missing");
		else
			snprintf(hs, sizeof(hs), "%llu", (unsigned long long)have);
		snprintf(why, n, "Python %s does not lay out its structures as the agent module for Python %s "
			 "reads them: %s is %s in the interpreter, %llu in the module; this process is not "
			 "profiled. Build a module for this interpreter with: make PYTHONS=%s",
			 running, built, f->name, hs, (unsigned long long)f->compiled, exe);
		return -1;
	}
	return 0;
}

/*
 * srcqual.h — qualified names for code objects of CPython 3.8-3.10, from
 * their source file.
 *
 * Before 3.11 a code object carries only co_name ("method", "inner"); the
 * qualified name ("K.method", "outer.<locals>.inner") lives in the function
 * object, which no frame points to and which the writer thread, without
 * the GIL, cannot find. The compiler derived it from the nesting of `def`
 * and `class` statements around co_firstlineno, so the same nesting read
 * back from the source gives the same answer: this module scans the file
 * once (strings, comments, brackets, continuations and decorators
 * understood), keeps one record per logical line, and rebuilds the name
 * from the indentation of the enclosing statements.
 *
 * Used from the writer thread (may read files) and from the code
 * deallocation hook (cache only, no I/O: it runs with the GIL held).
 */
#ifndef STRATA_SRCQUAL_H
#define STRATA_SRCQUAL_H

#include <stddef.h>
#include <stdint.h>

/* The qualified name of the code object named `co_name` whose first line
 * is `firstlineno` in the source text src[0..len), as a malloc'ed string,
 * or NULL if the source does not show one (no such statement there: the
 * file changed, or the code came from elsewhere). */
char *srcqual_from_text(const char *src, size_t len, uint32_t firstlineno, const char *co_name);

/* The same for the file at `path` (co_filename), read on first use and
 * cached. With allow_io == 0 only an already cached file is consulted. */
char *srcqual_lookup(const char *path, uint32_t firstlineno, const char *co_name, int allow_io);

#endif

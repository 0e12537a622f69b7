/*
 * test_srcqual.c — unit test of the source-based qualified names used for
 * CPython 3.8-3.10 (src/py/srcqual.c).
 *
 *   test_srcqual            built-in cases; exit status 0 if all pass
 *   test_srcqual --batch    reads "path<TAB>firstlineno<TAB>co_name" lines
 *                           on stdin, prints one qualified name (or "-")
 *                           per line: tests/versions/sweep_srcqual.py uses
 *                           it to compare with CPython's own co_qualname
 *                           over a whole standard library
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/py/srcqual.h"

static const char SRC[] =
	"import os\n"                                   /* 1 */
	"class K:\n"                                    /* 2 */
	"    '''doc\n"                                  /* 3 */
	"def not_real():\n"                             /* 4 */
	"    '''\n"                                     /* 5 */
	"    def method(self):\n"                       /* 6 */
	"        return [x for x in\n"                  /* 7 */
	"                (lambda: 1)()]\n"              /* 8 */
	"    @staticmethod\n"                           /* 9 */
	"    @deco(\n"                                  /* 10 */
	"        arg=1)\n"                              /* 11 */
	"    async def decorated(x=lambda: 2,\n"        /* 12 */
	"                        y='#'):\n"             /* 13 */
	"        pass\n"                                /* 14 */
	"    class Inner(object): pass\n"               /* 15 */
	"\n"                                            /* 16 */
	"# def comment():\n"                            /* 17 */
	"def outer(a,\n"                                /* 18 */
	"          b):\n"                               /* 19 */
	"    s = \"\"\"\n"                              /* 20 */
	"class Fake:\n"                                 /* 21 */
	"\"\"\"\n"                                      /* 22 */
	"    x = 1 + \\\n"                              /* 23 */
	"2\n"                                           /* 24 */
	"    def inner():\n"                            /* 25 */
	"\tclass L:\n"                                  /* 26 */
	"\t    def m(self): return (i for i in ())\n"   /* 27 */
	"        return L\n"                            /* 28 */
	"    return inner\n"                            /* 29 */
	"f = lambda: 0\n";                              /* 30 */

struct tcase {
	unsigned line;
	const char *name, *want; /* want NULL: no answer expected */
};

static const struct tcase cases[] = {
	{ 2, "K", "K" },
	{ 4, "not_real", NULL }, /* inside a docstring */
	{ 6, "method", "K.method" },
	{ 7, "<listcomp>", "K.method.<locals>.<listcomp>" },
	{ 8, "<lambda>", "K.method.<locals>.<lambda>" },
	{ 9, "decorated", "K.decorated" },
	{ 12, "<lambda>", "K.<lambda>" }, /* default argument: the class scope */
	{ 15, "Inner", "K.Inner" },
	{ 17, "comment", NULL },
	{ 18, "outer", "outer" },
	{ 21, "Fake", NULL }, /* inside a string */
	{ 25, "inner", "outer.<locals>.inner" },
	{ 26, "L", "outer.<locals>.inner.<locals>.L" },
	{ 27, "m", "outer.<locals>.inner.<locals>.L.m" },
	{ 27, "<genexpr>", "outer.<locals>.inner.<locals>.L.m.<locals>.<genexpr>" },
	{ 30, "<lambda>", "<lambda>" },
	{ 6, "wrong_name", NULL }, /* the file does not match */
	{ 1, "<module>", NULL },
};

static int builtin(void)
{
	int bad = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct tcase *c = &cases[i];
		char *q = srcqual_from_text(SRC, sizeof(SRC) - 1, c->line, c->name);
		int ok = (!q && !c->want) || (q && c->want && !strcmp(q, c->want));
		if (!ok) {
			printf("FAIL line %u %s: got %s, want %s\n", c->line, c->name, q ? q : "(none)",
			       c->want ? c->want : "(none)");
			bad++;
		}
		free(q);
	}
	printf("srcqual: %zu cases, %d failed\n", sizeof(cases) / sizeof(cases[0]), bad);
	return bad != 0;
}

static int batch(void)
{
	char line[8192];
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		if (!t2) {
			puts("-");
			continue;
		}
		*t1 = *t2 = 0;
		char *q = srcqual_lookup(line, (unsigned)strtoul(t1 + 1, NULL, 10), t2 + 1, 1);
		puts(q ? q : "-");
		free(q);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--batch"))
		return batch();
	return builtin();
}

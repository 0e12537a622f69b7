#!/usr/bin/env python3
"""sweep_srcqual.py: measures the source-based qualified names (what the
agent reports for CPython 3.8-3.10) against CPython's own co_qualname.

    tests/versions/sweep_srcqual.py TEST_SRCQUAL DIR [DIR...]

Compiles every .py file under DIR with this interpreter (3.11 or later, for
co_qualname), asks TEST_SRCQUAL --batch (built from tests/unit/test_srcqual.c)
for each code object's name from its source, and prints the agreement and
the first disagreements. Run it over a 3.8-3.10 standard library to see how
the approach does on real code.
"""
import os
import subprocess
import sys


def codes(co, out):
    out.append(co)
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            codes(c, out)


def main():
    if sys.version_info < (3, 11) or len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = []
    for d in sys.argv[2:]:
        for root, _, files in os.walk(d):
            for f in files:
                if not f.endswith(".py"):
                    continue
                p = os.path.join(root, f)
                try:
                    with open(p, "rb") as fh:
                        top = compile(fh.read(), p, "exec", dont_inherit=True)
                except (SyntaxError, ValueError, UnicodeDecodeError):
                    continue
                cs = []
                codes(top, cs)
                for c in cs:
                    if c.co_name != "<module>":
                        rows.append((p, c.co_firstlineno, c.co_name, c.co_qualname))
    inp = "".join("%s\t%d\t%s\n" % r[:3] for r in rows)
    out = subprocess.run([sys.argv[1], "--batch"], input=inp, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout.splitlines()
    same = none = 0
    wrong = []
    for r, got in zip(rows, out):
        if got == r[3]:
            same += 1
        elif got == "-":
            none += 1
            wrong.append((r, got))
        else:
            wrong.append((r, got))
    n = len(rows)
    print("%d code objects: %d right (%.2f%%), %d unresolved (co_name kept), %d wrong"
          % (n, same, 100.0 * same / max(1, n), none, n - same - none))
    for r, got in wrong[:25]:
        print("  %s:%d %s: got %s, want %s" % (r[0], r[1], r[2], got, r[3]))
    sys.exit(0 if n and same >= 0.99 * n else 1)


main()

# truth.py: ground truth from the interpreter itself, for check_versions.py.
#
# Runs under the interpreter being checked (so it must stay 3.8-compatible).
# Reads a JSON request on stdin: {"files": {path: [[name, firstlineno,
# [lasti, ...]], ...]}} where lasti is in 2-byte code units, as strata
# records it. Compiles each file with this interpreter and answers, per code
# object found by (co_name, co_firstlineno): the line of each lasti (from
# co_lines() on 3.10+, dis.findlinestarts() before), the line table the
# agent should have copied (its length and format) and the qualified name
# the interpreter gives the code object.
import dis
import json
import sys


def walk(code, qual, out):
    out.append((code, qual))
    consts = code.co_consts
    for i, c in enumerate(consts):
        if hasattr(c, "co_code"):
            if hasattr(c, "co_qualname"):
                q = c.co_qualname
            else:
                # Before 3.11 the compiler puts the qualified name right
                # after the code object, for MAKE_FUNCTION.
                # A class body instead gets its plain name there, and
                # stores its qualified name first thing (__qualname__ = ...).
                nxt = consts[i + 1] if i + 1 < len(consts) else None
                q = nxt if isinstance(nxt, str) else None
                if c.co_names[:2] == ("__name__", "__module__") and "__qualname__" in c.co_names:
                    q = c.co_consts[0] if isinstance(c.co_consts[0], str) else None
            walk(c, q, out)


def line_of(code, lasti):
    if lasti < 0:
        return None
    off = lasti * 2
    if hasattr(code, "co_lines"):
        for start, end, line in code.co_lines():
            if start <= off < end:
                # Some instructions have no line (3.11+: the clean-up
                # code of an except block): 0, unlike an offset outside
                # the code (None).
                return line if line is not None else 0
        return None
    line = None
    for start, ln in dis.findlinestarts(code):
        if start > off:
            break
        line = ln
    return line


def linetable(code):
    if sys.version_info >= (3, 11):
        return 3, len(code.co_linetable)
    if sys.version_info >= (3, 10):
        return 2, len(code.co_linetable)
    return 1, len(code.co_lnotab)


def main():
    req = json.load(sys.stdin)
    ans = {}
    for path, wanted in req["files"].items():
        with open(path, "rb") as f:
            src = f.read()
        codes = []
        walk(compile(src, path, "exec"), "<module>", codes)
        res = []
        for name, first, lastis in wanted:
            match = [(c, q) for c, q in codes if c.co_name == name and c.co_firstlineno == first]
            if not match:
                res.append(None)
                continue
            c, q = match[0]
            fmt, ltlen = linetable(c)
            res.append({"qualname": q, "fmt": fmt, "ltlen": ltlen,
                        "lines": [line_of(c, x) for x in lastis]})
        ans[path] = res
    json.dump(ans, sys.stdout)


main()

"""python -m strata [strata record options] [--] script.py [args...]
python -m strata [options] -m module [args...]
python -m strata [options] -c 'code' [args...]

Runs the program with this interpreter under `strata record` (the process
is replaced by it): the same options, the same profile, the same exit
status. `strata record --help` lists the options.
"""
import os
import re
import subprocess
import sys

from ._agent import AgentError, strata_cli


def value_options(cli):
    """Options of `strata record` that take a value, read from its own
    help, so they stay in step with whatever record accepts."""
    out = subprocess.run([cli, "record", "--help"], capture_output=True, text=True).stdout
    opts = set()
    for line in out.splitlines():
        m = re.match(r"^\s+(-\w)?(?:,\s*)?(--[\w-]+)?\s+([A-Z][A-Z_]*)\b", line)
        if m and (m.group(1) or m.group(2)):
            opts.update(o for o in m.group(1, 2) if o)
    return opts


def split_args(argv, takes_value):
    """(record options, program argv): the program starts at the first
    argument that is not an option, at `--`, or at -m / -c."""
    opts, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return opts, argv[i + 1:]
        if a in ("-m", "-c"):
            return opts, argv[i:]
        if not a.startswith("-") or a == "-":
            return opts, argv[i:]
        opts.append(a)
        if a in takes_value:
            if i + 1 >= len(argv):
                raise SystemExit("strata: option %s needs a value" % a)
            opts.append(argv[i + 1])
            i += 1
        i += 1
    return opts, []


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    try:
        cli = strata_cli()
    except AgentError as e:
        print("strata: %s" % e, file=sys.stderr)
        return 2
    opts, prog = split_args(argv, value_options(cli))
    if not prog or (prog[0] in ("-m", "-c") and len(prog) < 2):
        print("strata: no program given\n\n" + __doc__.strip(), file=sys.stderr)
        return 2
    cmd = [sys.executable] + prog
    os.execv(cli, [cli, "record"] + opts + ["--"] + cmd)


if __name__ == "__main__":
    sys.exit(main())

"""The `strata` command of the wheel: a console entry point that replaces
itself with the strata executable inside this package (strata/bin/strata).

The executable is found relative to this file, never on PATH (where this
entry point itself is), so a venv, `pip install --user` and a system
install behave alike. It locates the agent relative to itself
(bin/../lib/strata), which holds inside the package as in an installed
prefix.
"""
import os
import sys

from ._agent import packaged_cli


def main():
    cli = packaged_cli()
    if not cli:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.stderr.write("strata: %s/bin/strata is missing or not executable: this installation of the "
                         "strata package is incomplete (reinstall strata-profiler)\n" % here)
        return 127
    try:
        os.execv(cli, [cli] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("strata: cannot run %s: %s\n" % (cli, e))
        return 126


if __name__ == "__main__":
    sys.exit(main())

#!/bin/sh
# benchenv.sh — the comparison tools the benchmarks run beside strata:
# memray (bench/objects.py, beside strata record --objects), py-spy
# (bench/procs.py, beside strata record on a process tree; bench/compare.py)
# and Austin (bench/compare.py; austin-dist 3.6.0, whose binary needs glibc
# 2.12: 4.x needs 2.38, newer than Debian 12's), from PyPI, in a
# pyenv interpreter's test virtualenv (.venvs/<version>/, made by
# scripts/pyenvs.sh). Never touches a system interpreter. tracemalloc is in
# the standard library. Prints the virtualenv's python; its bin/ holds
# py-spy.
#
#   scripts/benchenv.sh [VERSION]   default: the newest 3.11 virtualenv
set -u
cd "$(dirname "$0")/.." || exit 1
ver=${1:-$(ls .venvs 2>/dev/null | grep '^3\.11\.' | sort -V | tail -1)}
v=.venvs/$ver
if [ -z "$ver" ] || [ ! -x "$v/bin/python" ]; then
	scripts/pyenvs.sh || true
	ver=${1:-$(ls .venvs 2>/dev/null | grep '^3\.11\.' | sort -V | tail -1)}
	v=.venvs/$ver
fi
[ -x "$v/bin/python" ] || { echo "benchenv.sh: no virtualenv for Python ${ver:-3.11} (scripts/pyenvs.sh)" >&2; exit 1; }
pkgs="memray py-spy austin-dist==3.6.0"
[ -f "$v/.bench-ready" ] && [ "$(cat "$v/.bench-ready")" = "$pkgs" ] && { echo "$v/bin/python"; exit 0; }
"$v/bin/python" -m pip install -q --disable-pip-version-check $pkgs >&2 ||
	{ echo "benchenv.sh: installing $pkgs for $ver failed" >&2; exit 1; }
echo "$pkgs" >"$v/.bench-ready"
echo "$v/bin/python"

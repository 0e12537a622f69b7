#!/bin/sh
# benchenv.sh — the comparison tools bench/objects.py runs beside
# strata record --objects: memray (PyPI) in a pyenv interpreter's test
# virtualenv (.venvs/<version>/, made by scripts/pyenvs.sh). Never touches
# a system interpreter. tracemalloc is in the standard library.
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
[ -f "$v/.bench-ready" ] && { echo "$v/bin/python"; exit 0; }
"$v/bin/python" -m pip install -q --disable-pip-version-check memray >&2 ||
	{ echo "benchenv.sh: installing memray for $ver failed" >&2; exit 1; }
touch "$v/.bench-ready"
echo "$v/bin/python"

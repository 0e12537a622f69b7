#!/bin/sh
# pyenvs.sh — one virtualenv per pyenv interpreter, for the functional tests
# that need NumPy or Numba under that version (Debian's /usr/bin/python3 uses
# Debian's python3-numpy/python3-numba instead). Never touches the system
# interpreters: everything goes under .venvs/<version>/.
#
#   scripts/pyenvs.sh            create/update the virtualenvs that are missing
#
# and .venvs/pytest/<version> with pytest and pytest-timeout for every
# interpreter the tests use, Debian's included (below).
#
# A virtualenv is complete when its .ready file exists. A failed install (no
# network, no wheel for that version) leaves it incomplete, and the script
# goes on with the others and then exits non-zero: the tests that need
# NumPy or Numba under that version cannot run, and `make check` says so
# here rather than later.
set -u
cd "$(dirname "$0")/.." || exit 1
failed=""
root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
mkdir -p .venvs
for py in "$root"/versions/*/bin/python; do
	[ -x "$py" ] || continue
	ver=$("$py" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || continue
	minor=$("$py" -c 'import sys; print(sys.version_info[1])')
	major=$("$py" -c 'import sys; print(sys.version_info[0])')
	[ "$major" -eq 3 ] && [ "$minor" -ge 8 ] || continue
	v=.venvs/$ver
	[ -f "$v/.ready" ] && continue
	echo "pyenvs.sh: preparing $v" >&2
	"$py" -m venv "$v" || { echo "pyenvs.sh: cannot create a virtualenv for $ver" >&2; failed="$failed $ver"; continue; }
	pkgs="numpy"
	# Current Numba supports 3.10 and newer (NUMBA_FROM in tests/func/conftest.py).
	[ "$minor" -ge 10 ] && pkgs="$pkgs numba"
	if "$v/bin/python" -m pip install -q --disable-pip-version-check $pkgs; then
		touch "$v/.ready"
	else
		echo "pyenvs.sh: installing $pkgs for $ver failed" >&2
		failed="$failed $ver"
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
	v=.venvs/pytest/$ver
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

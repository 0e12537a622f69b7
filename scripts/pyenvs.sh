#!/bin/sh
# pyenvs.sh — one virtualenv per pyenv interpreter, for the functional tests
# that need NumPy or Numba under that version (Debian's /usr/bin/python3 uses
# Debian's python3-numpy/python3-numba instead). Never touches the system
# interpreters: everything goes under .venvs/<version>/.
#
#   scripts/pyenvs.sh            create/update the virtualenvs that are missing
#
# A virtualenv is complete when its .ready file exists; a failed install
# (no network, no wheel for that version) leaves it incomplete and the tests
# that need it skip with a message naming the version.
set -u
cd "$(dirname "$0")/.."
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
	"$py" -m venv "$v" || { echo "pyenvs.sh: cannot create a virtualenv for $ver" >&2; continue; }
	pkgs="numpy"
	# Current Numba supports 3.10 and newer.
	[ "$minor" -ge 10 ] && pkgs="$pkgs numba"
	if "$v/bin/python" -m pip install -q --disable-pip-version-check $pkgs; then
		touch "$v/.ready"
	else
		echo "pyenvs.sh: installing $pkgs for $ver failed; tests needing them will skip" >&2
	fi
done

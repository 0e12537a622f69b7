#!/bin/sh
# pythons.sh — lists the Python interpreters strata builds an agent for, as a
# makefile fragment (one agent module per interpreter, from its own headers).
#
#   scripts/pythons.sh [PYTHON...]
#
# Without arguments: Debian's /usr/bin/python3 and every pyenv interpreter
# from 3.8 on (under `pyenv root`, or ~/.pyenv). Interpreters without their
# internal headers are skipped with a note on stderr.
set -u

if [ $# -eq 0 ]; then
	set --
	[ -x /usr/bin/python3 ] && set -- /usr/bin/python3
	root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
	for p in "$root"/versions/*/bin/python; do
		[ -x "$p" ] && set -- "$@" "$p"
	done
fi

versions=""
for py in "$@"; do
	info=$("$py" -c 'import sys, sysconfig
v = sys.version_info
print("%d.%d.%d" % v[:3], "%d.%d" % v[:2], sysconfig.get_paths()["include"], v >= (3, 8),
      bool(sysconfig.get_config_var("Py_GIL_DISABLED")))' 2>/dev/null) || {
		echo "pythons.sh: skipping $py (does not run)" >&2; continue; }
	set -- $info
	ver=$1; minor=$2; inc=$3; ok=$4; nogil=$5
	if [ "$ok" != True ]; then
		continue # older than 3.8: not supported
	fi
	if [ "$nogil" = True ]; then
		# Its version number is the default build's: a module built
		# from its headers would take that build's name (docs/versions.md).
		echo "pythons.sh: skipping $py: a free-threaded build (Py_GIL_DISABLED), which strata does not support" >&2
		continue
	fi
	if [ ! -f "$inc/internal/pycore_pystate.h" ]; then
		echo "pythons.sh: skipping $py: no internal headers under $inc" >&2
		continue
	fi
	case " $versions " in *" $ver "*) continue ;; esac
	versions="$versions $ver"
	echo "PY_INC_$ver := $inc"
	echo "PY_EXE_$ver := $py"
	echo "PY_MINOR_$ver := $minor"
done
echo "PY_VERSIONS :=$versions"

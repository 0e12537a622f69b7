#!/bin/sh
# pythons.sh — lists the Python interpreters found, as a makefile fragment:
# strata builds one agent module per supported interpreter, from its own
# headers, and `make check` fails for one it could not build.
#
#   scripts/pythons.sh [PYTHON...]
#
# Without arguments: Debian's /usr/bin/python3 and every pyenv interpreter
# (under `pyenv root`, or ~/.pyenv). For each version that runs:
#   PY_EXE_<ver>, PY_MINOR_<ver>   always
#   PY_INC_<ver>                   its headers, when the internal ones are there
#   PY_NOHEADERS_<ver>             else where they were looked for
# and PY_VERSIONS (every version that runs, first interpreter of a version
# wins), PY_BROKEN (interpreters that do not run). Which minor versions are
# supported is the Makefile's business (SUPPORTED_MINORS).
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
broken=""
for py in "$@"; do
	# Python 2 runs this too, so that it is reported, not taken for broken.
	info=$("$py" -c 'import sys, sysconfig
v = sys.version_info
nogil = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "-"
sys.stdout.write("%d.%d.%d %d.%d %s %s\n" % (v[0], v[1], v[2], v[0], v[1], nogil, sysconfig.get_paths()["include"]))' 2>/dev/null) || {
		echo "pythons.sh: $py does not run" >&2
		broken="$broken $py"
		continue
	}
	ver=${info%% *}
	rest=${info#* }
	minor=${rest%% *}
	rest=${rest#* }
	nogil=${rest%% *}
	inc=${rest#* }
	if [ "$nogil" = t ]; then
		# Same version number as the default build, other layouts: a
		# module built from its headers would take that build's name.
		echo "pythons.sh: $py is a free-threaded build (Py_GIL_DISABLED), which strata does not support: not built" >&2
		continue
	fi
	case " $versions " in *" $ver "*) continue ;; esac
	versions="$versions $ver"
	echo "PY_EXE_$ver := $py"
	echo "PY_MINOR_$ver := $minor"
	if [ -f "$inc/internal/pycore_pystate.h" ]; then
		echo "PY_INC_$ver := $inc"
	else
		echo "PY_NOHEADERS_$ver := $inc"
	fi
done
echo "PY_VERSIONS :=$versions"
echo "PY_BROKEN :=$broken"

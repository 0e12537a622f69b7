#!/bin/sh
# pythons.sh — lists the Python interpreters found, as a makefile fragment:
# strata builds one agent module per supported interpreter, from its own
# headers, and `make check` fails for one it could not build.
#
#   scripts/pythons.sh [PYTHON | INCLUDE_DIR ...]
#
# Without arguments: Debian's /usr/bin/python3 and every pyenv interpreter
# (under `pyenv root`, or ~/.pyenv). An INCLUDE_DIR (a directory holding
# patchlevel.h, such as ROOT/usr/include/python3.14) stands for an
# interpreter that cannot run here, one in another root (the wheel's 3.14
# and 3.15 come from the sid root's headers, built with this machine's
# compiler and C library so that they load wherever the rest does): its
# version is read from patchlevel.h, and the directory above it is searched
# after the system's own for what its headers include from there (Debian's
# multiarch pyconfig.h). For each version that runs (or is read):
#   PY_EXE_<ver>, PY_MINOR_<ver>   always
#   PY_INC_<ver>                   its headers, when the internal ones are there
#   PY_NOHEADERS_<ver>             else where they were looked for
#   PY_CFLAGS_<ver>                for an INCLUDE_DIR: -idirafter DIR/..
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
# headers_info DIR: what the interpreter would print below, from its headers.
headers_info() {
	d=$1
	pl=$d/patchlevel.h
	[ -f "$pl" ] || return 1
	num() { sed -n "s/^#define[ 	]*$1[ 	]*\([0-9]*\).*/\1/p" "$pl" | head -n 1; }
	maj=$(num PY_MAJOR_VERSION) min=$(num PY_MINOR_VERSION) mic=$(num PY_MICRO_VERSION)
	[ -n "$maj" ] && [ -n "$min" ] && [ -n "$mic" ] || return 1
	nogil=-
	for c in "$d/pyconfig.h" "$d/../x86_64-linux-gnu/python$maj.$min/pyconfig.h"; do
		[ -f "$c" ] && grep -q '^#define Py_GIL_DISABLED 1' "$c" && nogil=t
	done
	echo "$maj.$min.$mic $maj.$min $nogil $d"
}

# interp_info PY: the interpreter's version, minor, free-threaded flag and
# include directory. Python 2 runs this too, so that it is reported, not
# taken for broken.
interp_info() {
	"$1" -c 'import sys, sysconfig
v = sys.version_info
nogil = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "-"
sys.stdout.write("%d.%d.%d %d.%d %s %s\n" % (v[0], v[1], v[2], v[0], v[1], nogil, sysconfig.get_paths()["include"]))' 2>/dev/null
}

for py in "$@"; do
	cflags=""
	if [ -d "$py" ]; then
		info=$(headers_info "$py") || {
			echo "pythons.sh: $py has no patchlevel.h with a version: not a Python include directory" >&2
			broken="$broken $py"
			continue
		}
		cflags="-idirafter $(cd "$py/.." && pwd)"
	else
		info=$(interp_info "$py") || {
			echo "pythons.sh: $py does not run" >&2
			broken="$broken $py"
			continue
		}
	fi
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
	[ -n "$cflags" ] && echo "PY_CFLAGS_$ver := $cflags"
	if [ -f "$inc/internal/pycore_pystate.h" ]; then
		echo "PY_INC_$ver := $inc"
	else
		echo "PY_NOHEADERS_$ver := $inc"
	fi
done
echo "PY_VERSIONS :=$versions"
echo "PY_BROKEN :=$broken"

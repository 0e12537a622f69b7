#!/bin/sh
# builddeps.sh — checks that this machine can build strata, before the
# build starts, and names in ONE line what to install where it cannot:
# `pip install .` and `make` stop with that line instead of a compiler
# error about a missing header.
#
#   scripts/builddeps.sh [PYTHON...]
#
# Checks the C compiler ($CC, default cc), make, the headers and libraries
# the CLI, the agent and its helper are built with (libcurl's header only:
# strata send loads the system's libcurl when it runs), and for each PYTHON
# named, its internal headers (the per-version module is compiled against
# them). Exit status 0, or 1 after one line on stderr:
#   strata: cannot build: missing zstd.h, capstone/capstone.h: install
#   libzstd-dev libcapstone-dev (Debian, Ubuntu) or libzstd-devel
#   capstone-devel (Fedora)
# (deps.sh installs the Debian packages; this only checks, for any system.)
set -u

CC=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/strata-builddeps.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

what=""
deb=""
rpm=""
missing() {
	what="${what:+$what, }$1"
	deb="${deb:+$deb }$2"
	rpm="${rpm:+$rpm }$3"
}

# A compiler first: without it, every other check would fail for that.
if ! command -v "$CC" >/dev/null 2>&1; then
	missing "a C compiler ($CC)" gcc gcc
elif ! command -v make >/dev/null 2>&1; then
	missing make make make
fi

if [ -z "$what" ]; then
	# header  Debian package  Fedora package
	while read -r h d r; do
		printf '#include <%s>\n' "$h" > "$tmp/h.c"
		"$CC" -E -o /dev/null "$tmp/h.c" 2>/dev/null || missing "$h" "$d" "$r"
	done <<-EOF
		zstd.h libzstd-dev libzstd-devel
		zlib.h zlib1g-dev zlib-devel
		gelf.h libelf-dev elfutils-libelf-devel
		elfutils/libdw.h libdw-dev elfutils-devel
		elfutils/debuginfod.h libdebuginfod-dev elfutils-debuginfod-client-devel
		capstone/capstone.h libcapstone-dev capstone-devel
		curses.h libncurses-dev ncurses-devel
		curl/curl.h libcurl4-openssl-dev libcurl-devel
	EOF
	# Libraries: the headers can be there without the link-time library
	# (the -dev split differs between distributions).
	if [ -z "$what" ]; then
		echo 'int main(void) { return 0; }' > "$tmp/l.c"
		while read -r l d r; do
			"$CC" -o "$tmp/l" "$tmp/l.c" "-l$l" 2>/dev/null || missing "lib$l" "$d" "$r"
		done <<-EOF
			zstd libzstd-dev libzstd-devel
			z zlib1g-dev zlib-devel
			elf libelf-dev elfutils-libelf-devel
			dw libdw-dev elfutils-devel
			capstone libcapstone-dev capstone-devel
			ncursesw libncurses-dev ncurses-devel
			tinfo libncurses-dev ncurses-devel
			stdc++ g++ libstdc++-devel
		EOF
	fi
fi

# The per-version module: CPython's internal headers (Py_BUILD_CORE).
for py in "$@"; do
	info=$("$py" -c 'import sys, sysconfig
sys.stdout.write("%d.%d %s" % (sys.version_info[0], sys.version_info[1], sysconfig.get_paths()["include"]))' 2>/dev/null) || {
		missing "a Python that runs ($py)" python3 python3
		continue
	}
	v=${info%% *}
	inc=${info#* }
	[ -f "$inc/internal/pycore_pystate.h" ] && [ -f "$inc/Python.h" ] ||
		missing "Python $v's internal headers ($inc/internal)" "python$v-dev" python3-devel
done

[ -z "$what" ] && exit 0
# Each package once, in the order first needed.
uniq_words() { echo "$*" | tr ' ' '\n' | awk 'NF && !seen[$0]++' | tr '\n' ' ' | sed 's/ $//'; }
echo "strata: cannot build: missing $what: install $(uniq_words $deb) (Debian, Ubuntu) or $(uniq_words $rpm) (Fedora)" >&2
exit 1

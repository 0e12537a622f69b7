#!/bin/sh
# deps.sh — installs what strata needs on a Debian 12 machine, idempotently.
#
#   scripts/deps.sh          build + test dependencies (make check)
#   scripts/deps.sh demo     build + demo dependencies (make demo)
#   scripts/deps.sh build    build dependencies only
#   scripts/deps.sh list WHAT  prints WHAT's packages (build, demo, test) and
#                              installs nothing (scripts/sidroot.sh reads the
#                              build list from here)
#
# Debian packages come from apt (root is required to install; a machine
# that already has them needs nothing). Test tools from PyPI and npm are
# installed by the test scripts into project-local directories, never into
# the system interpreters.
set -eu

what=${1:-test}
list=""
if [ "$what" = list ]; then
	list=1
	what=${2:-test}
fi

# Build: compiler, compression, ELF/DWARF, disassembly, curses, Python headers.
BUILD="gcc make pkg-config libzstd-dev zlib1g-dev libdw-dev libelf-dev libcapstone-dev libncurses-dev python3-dev"
# Continuous profiling (issue 25): the sender posts OTLP with libcurl
# (TLS, proxies, the system's CA store).
BUILD="$BUILD libcurl4-openssl-dev"
# The demo profiles a program that mixes Python, NumPy and Numba.
DEMO="python3-numpy python3-numba"
# Tests: pytest (and xdist: the functional suite runs on every core), sanitizers and libFuzzer (clang), valgrind, perf, tmux for
# the live view, and the real consumers of every export format. (Node.js
# and npm come with the machine: Debian's npm package would fight them.)
TEST="python3-pytest python3-pytest-xdist python3-venv clang libclang-rt-14-dev valgrind linux-perf tmux libdevel-nytprof-perl protobuf-compiler chromium"

# pprof export tests (issue 3): `go tool pprof`, from Debian's golang-go
# unless a Go toolchain is already installed.
command -v go >/dev/null 2>&1 || TEST="$TEST golang-go"

# --native (issue 4): libdw/libelf for symbols and the CFI tests, g++ for the
# C++ symbolizer fixture (libstdc++'s demangler comes with it); debuginfod's
# client header (the library is loaded at run time, when DEBUGINFOD_URLS is
# set, to fetch the recorded build of an object replaced since; issue 14).
BUILD="$BUILD g++ libdebuginfod-dev"
# --native tests: glibc's detached debug information (Debian main; valgrind
# depends on it anyway), so libc/libm frames have names and lines.
TEST="$TEST libc6-dbg"
# CPython 3.14 and 3.15 (issue 12) are tested in a Debian sid root made by
# scripts/sidroot.sh with debootstrap.
TEST="$TEST debootstrap"
# CPython's own regression tests under strata (issue 11): Debian's 3.11 ships
# its test package separately (pyenv's interpreters carry theirs).
TEST="$TEST libpython3.11-testsuite"

case "$what" in
	build) pkgs="$BUILD" ;;
	demo) pkgs="$BUILD $DEMO" ;;
	test | check) pkgs="$BUILD $DEMO $TEST" ;;
	*) echo "usage: $0 [build|demo|test] | $0 list [build|demo|test]" >&2; exit 2 ;;
esac
if [ -n "$list" ]; then
	echo $pkgs
	exit 0
fi

missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps.sh: installing:$missing" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing

#!/bin/sh
# sidroot.sh — a Debian sid root for building and testing strata under
# CPython 3.14 and 3.15 (issue 12), which Debian 12 and pyenv here do not
# have: sid serves python3.14 (with python3-numba) and experimental serves
# python3.15, both with their internal headers.
#
#   scripts/sidroot.sh ensure         create or update the root; print its path
#   scripts/sidroot.sh run CMD [ARG...]
#                                     run CMD in the root, in this checkout
#   scripts/sidroot.sh shell          an interactive shell there
#   scripts/sidroot.sh build          make PYTHONS="python3.14 python3.15" BUILD=build-sid
#   scripts/sidroot.sh prepare        ensure, then build what check runs
#   scripts/sidroot.sh check [PYTEST ARGS...]
#                                     build, then the functional suite under
#                                     3.14 and 3.15 only (tests/func, or the
#                                     tests named; -k "debian-3.14 or
#                                     debian-3.15" keeps only the tests run
#                                     once per interpreter)
#   scripts/sidroot.sh regrtests [ARGS...]
#                                     build, then CPython's own regression
#                                     tests under strata on 3.14 and 3.15
#                                     (tests/cpython/run_regrtests.py, cpu
#                                     mode; ARGS go to it)
#
# The archive is the one this machine's apt already uses: the first
# source of /etc/apt/sources.list, /etc/apt/sources.list.d/*.sources
# (deb822 URIs:) and *.list that serves sid, so a machine behind its own
# mirror or proxy needs no setting (apt's Acquire::http(s)::Proxy is used
# too, and written into the root). STRATA_SID_MIRROR=URL overrides it.
#
# The root is kept outside the checkout ($STRATA_SIDROOT, default
# /var/cache/strata/sid/root), so a second run and other clones reuse it.
# It is made once (debootstrap, about a minute, and the packages, about
# two) and changed only when what it should hold changes: a new package
# list is installed into it, a new recipe (SIDROOT_REV: sources, apt
# settings) makes it anew, beside the old one and swapped in whole, and
# the 3.15 virtualenv is made again when VENV_PKGS changes. The archive is
# a frozen snapshot, so apt is told not to check the Release files' dates.
#
# Every run gets its own mount namespace (unshare): /proc, /sys, /dev
# (with /dev/pts and /dev/shm) and the checkout (at the same path as
# outside, so build-sid's dependency files hold) are mounted in it, and the
# kernel drops them all when the run ends, however it ends (a kill
# included); nothing is left mounted on the host and concurrent runs do
# not see each other's mounts.
#
# Exit status: that of the command (or of make / pytest); 77 when this
# machine cannot have a root (cannot reach the archive and has none
# cached, or is not root and has no sudo), after ONE line saying why
# (sidroot.sh: skipped: ...); 1 when making the root failed; 2 for usage.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
SKIP=77
SIDROOT_REV=1
MIRROR=${STRATA_SID_MIRROR:-}
ROOT=${STRATA_SIDROOT:-/var/cache/strata/sid/root}
CACHE=$(dirname "$ROOT")
# Where the root keeps virtualenvs (by interpreter version) for what Debian
# does not package for an interpreter: Numba for 3.15 comes from PyPI (and
# with it what the tests import from that virtualenv: python-daemon).
VENVS=/opt/strata/venvs
VENV_PKGS="numpy numba python-daemon"

say() { echo "sidroot.sh: $*" >&2; }
skip() { echo "sidroot.sh: skipped: $*" >&2; exit $SKIP; }

# What the root holds. strata's own build dependencies come from deps.sh
# (python3-dev there is Debian 12's 3.11; the Pythons are named here).
build_deps=$(sh "$top/scripts/deps.sh" list build | tr ' ' '\n' | grep -vx 'python3-dev' | tr '\n' ' ')
PYTHONS_PKGS="python3.14 python3.14-dev python3.14-venv python3.15 python3.15-dev python3.15-venv"
# Test libraries: NumPy for both (sid's python3-numpy has 3.14 and 3.15
# builds), Numba for 3.14 (sid's python3-numba 0.65 is built for 3.14 only;
# experimental's 0.67 too), pytest with xdist for the functional suite,
# setuptools for the test that pip-installs strata's Python package,
# python-daemon for a real daemon under strata (tests/func/test_limits.py;
# Debian's is pure Python, importable by both interpreters).
# The interpreters' own test suites for tests/cpython/run_regrtests.py.
TEST_LIBS="python3-numpy python3-numba python3-pytest python3-pytest-xdist python3-setuptools python3-daemon
	libpython3.14-testsuite libpython3.15-testsuite"
# The asyncio tests' uvloop and aiohttp: sid's packages for 3.14; wheels
# from PyPI in the 3.15 virtualenv (VENV_EXTRAS, added to it without
# making it anew).
TEST_LIBS="$TEST_LIBS python3-uvloop python3-aiohttp"
VENV_EXTRAS="uvloop aiohttp"
# Tools the functional tests call: callgrind_annotate (valgrind), tmux for
# strata top, glibc's debug information for --native, protoc for pprof,
# flamegraph.pl (libdevel-nytprof-perl), perf, ps. Node.js with the npm
# consumers (speedscope, profiler-cli, playwright-core), chromium and Go's
# pprof are not installed here: their tests skip inside the root, saying
# so, and run on the host.
TEST_TOOLS="valgrind tmux libc6-dbg protobuf-compiler libdevel-nytprof-perl linux-perf procps"
PKGS=$(echo $build_deps $PYTHONS_PKGS $TEST_LIBS $TEST_TOOLS | tr ' ' '\n' | sort -u | tr '\n' ' ')
PKGS=${PKGS% }
INTERPS="/usr/bin/python3.14 /usr/bin/python3.15"

usage() {
	sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# ---- privileges -----------------------------------------------------------

if [ "$(id -u)" -ne 0 ]; then
	# debootstrap, chroot and mounts need root: run this script again under sudo.
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		exec sudo -n -E sh "$0" "$@"
	fi
	skip "needs root (or sudo without a password) for debootstrap, chroot and mounts"
fi

# ---- running inside -------------------------------------------------------

# in_root DIR CMD...: CMD in root DIR in a private mount namespace, at the
# checkout, with a clean environment (no LD_PRELOAD, pyenv or virtualenv of
# the host leaks in) but for TERM, CI and the STRATA_* and PYTEST_* variables.
in_root() {
	r=$1
	shift
	for name in TERM CI $(env | sed -n 's/^\(STRATA_[A-Z0-9_]*\|PYTEST_[A-Z0-9_]*\)=.*/\1/p'); do
		[ "$name" = STRATA_SIDROOT ] && continue
		eval "isset=\${$name+1} val=\${$name-}"
		[ -n "$isset" ] && set -- "$name=$val" "$@"
	done
	unshare --mount --propagation private -- sh -c '
		set -e
		r=$1 top=$2
		shift 2
		mount -t proc proc "$r/proc"
		mount --rbind /sys "$r/sys"
		mount --rbind /dev "$r/dev"
		# /dev/pts and /dev/shm come with /dev where the host mounts them
		# there; otherwise the root gets its own.
		mountpoint -q "$r/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts"
		mountpoint -q "$r/dev/shm" || mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
		mkdir -p "$r$top"
		mount --bind "$top" "$r$top"
		exec chroot "$r" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$top" /usr/bin/env -i \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 "$@"
	' sh "$r" "$top" "$@"
}

# ---- making the root --------------------------------------------------------

# reachable URL: whether the archive at URL serves sid.
reachable() {
	url="$1/dists/sid/Release"
	if command -v wget >/dev/null 2>&1; then
		wget -q -T 15 -t 1 --spider "$url" 2>/dev/null
	else
		python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=15)' "$url" 2>/dev/null
	fi
}

# The URIs of this host's apt sources ("deb" lines and deb822 stanzas that
# are enabled), one per line, in apt's order, with schemes debootstrap can
# use (http, https, ftp, file).
apt_uris() {
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		case "$f" in
		*.sources)
			awk '
				function flush() { if (deb && on) printf "%s", uris; deb = 0; on = 1; uris = "" }
				BEGIN { on = 1 }
				/^[ \t]*#/ { next }
				/^[ \t]*$/ { flush(); next }
				{ key = tolower($1) }
				key == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
				key == "enabled:" { on = tolower($2) != "no" }
				key == "uris:" { for (i = 2; i <= NF; i++) uris = uris $i "\n" }
				END { flush() }' "$f"
			;;
		*)
			sed -n 's/#.*//; s/\[[^]]*\]//; s/^[ \t]*deb[ \t][ \t]*\([^ \t]*\).*/\1/p' "$f"
			;;
		esac
	done | grep -E '^(https?|ftp|file):' | sed 's,/*$,,' | awk '!seen[$0]++'
}

# Sets MIRROR (unless STRATA_SID_MIRROR did) to the first of the host's
# sources that serves sid; returns 1, with the sources tried in TRIED, if
# none does.
find_mirror() {
	if [ -n "${STRATA_SID_MIRROR:-}" ]; then
		MIRROR=$STRATA_SID_MIRROR
		TRIED=$MIRROR
		reachable "$MIRROR"
		return
	fi
	TRIED=""
	for u in $(apt_uris); do
		TRIED="$TRIED${TRIED:+ }$u"
		if reachable "$u"; then
			MIRROR=$u
			return 0
		fi
	done
	[ -n "$TRIED" ] || TRIED="none found in /etc/apt/sources.list or /etc/apt/sources.list.d"
	return 1
}

# apt's proxies on this host (Acquire::http::Proxy, Acquire::https::Proxy),
# for debootstrap's downloads (wget reads http_proxy) and the root's apt.
apt_proxy() {
	command -v apt-config >/dev/null 2>&1 || return 0
	eval "$(apt-config shell APT_HTTP_PROXY Acquire::http::Proxy APT_HTTPS_PROXY Acquire::https::Proxy)"
	if [ -n "${APT_HTTP_PROXY:-}" ] && [ -z "${http_proxy:-}" ]; then
		export http_proxy="$APT_HTTP_PROXY"
	fi
	if [ -n "${APT_HTTPS_PROXY:-}" ] && [ -z "${https_proxy:-}" ]; then
		export https_proxy="$APT_HTTPS_PROXY"
	fi
}

need_debootstrap() {
	command -v debootstrap >/dev/null 2>&1 && return 0
	say "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1; }
}

# install_pkgs DIR: the package list into root DIR, then the venvs.
install_pkgs() {
	r=$1
	in_root "$r" sh -c '
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends $0 >/dev/null
		apt-get clean' "$PKGS" || return 1
	venv_done "$r" || venv_315 "$r"
}

# venv_315 DIR: the 3.15 virtualenv with Numba in root DIR.
# Tried once per recipe (VENV_PKGS): a failure is recorded, not retried
# (remove the recorded directory to try again).
venv_315() {
	r=$1
	# Numba for 3.15: Debian has none (python3-numba is built for 3.14
	# only), PyPI does. A venv of its own (not on top of Debian's
	# site-packages, where pip would take the 3.14-only python3-numba as
	# already installed), with NumPy and Numba from PyPI; if PyPI cannot
	# be reached, the Numba tests under 3.15 skip saying there is no Numba.
	# pip in the root trusts the certificates the host trusts (a machine
	# behind a TLS-inspecting proxy has that proxy's authority there).
	rm -f "$r/etc/strata-host-ca.crt"
	for c in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
		if [ -n "$c" ] && [ -f "$c" ]; then
			cp "$c" "$r/etc/strata-host-ca.crt"
			break
		fi
	done
	in_root "$r" sh -c '
		v=$(python3.15 -c "import sys; print(\"%d.%d.%d\" % sys.version_info[:3])")
		d=$0/$v
		cert=""
		[ -f /etc/strata-host-ca.crt ] && cert="--cert /etc/strata-host-ca.crt"
		rm -rf "$d"
		python3.15 -m venv "$d" &&
		"$d/bin/python" -m pip install $cert -q --disable-pip-version-check --no-cache-dir $1 &&
		"$d/bin/python" -c "import numba, numpy" &&
		echo "$1" > "$d/.ready" || {
			echo "sidroot.sh: no Numba from PyPI for Python $v: its Numba tests will skip" >&2
			rm -rf "$d"; mkdir -p "$d"; echo "$1" > "$d/.failed"; }' \
		"$VENVS" "$VENV_PKGS"
}

# venv_extras DIR: VENV_EXTRAS from wheels into root DIR's 3.15 virtualenv,
# tried once per list (recorded in .extras); a missing wheel skips the
# tests that use it.
venv_extras() {
	r=$1
	for d in "$r$VENVS"/3.15.*; do
		[ -f "$d/.ready" ] || continue
		[ "$(cat "$d/.extras" 2>/dev/null)" = "$VENV_EXTRAS" ] && continue
		in_root "$r" sh -c '
			cert=""
			[ -f /etc/strata-host-ca.crt ] && cert="--cert /etc/strata-host-ca.crt"
			for p in $1; do
				"$0/bin/python" -m pip install $cert -q --disable-pip-version-check --no-cache-dir --only-binary :all: "$p" ||
					echo "sidroot.sh: no $p wheel for Python 3.15: its asyncio tests with $p skip" >&2
			done
			echo "$1" > "$0/.extras"' "${d#$r}" "$VENV_EXTRAS"
	done
}

# venv_pytest DIR: pytest and pytest-timeout from PyPI for the root's 3.14
# and 3.15, under $VENVS/pytest/<version>, as scripts/pyenvs.sh makes them
# on the host (test_signals.py runs a pytest-timeout suite under strata).
# Tried once per recipe (.ready or .failed holds it); a failure skips
# those tests, saying so.
PYTEST_PKGS="pytest pytest-timeout"
venv_pytest() {
	r=$1
	for m in 3.14 3.15; do
		[ -x "$r/usr/bin/python$m" ] || continue
		in_root "$r" sh -c '
			v=$(python$1 -c "import sys; print(\"%d.%d.%d\" % sys.version_info[:3])") || exit 0
			d=$0/pytest/$v
			[ "$(cat "$d/.ready" "$d/.failed" 2>/dev/null)" = "$2" ] && exit 0
			cert=""
			[ -f /etc/strata-host-ca.crt ] && cert="--cert /etc/strata-host-ca.crt"
			rm -rf "$d"
			if python$1 -m venv "$d" &&
				"$d/bin/python" -m pip install $cert -q --disable-pip-version-check --no-cache-dir $2 &&
				"$d/bin/python" -c "import pytest, pytest_timeout"; then
				echo "$2" > "$d/.ready"
			else
				echo "sidroot.sh: no $2 from PyPI for Python $v: its pytest-timeout tests skip" >&2
				rm -rf "$d"; mkdir -p "$d"; echo "$2" > "$d/.failed"
			fi' "$VENVS" "$m" "$PYTEST_PKGS"
	done
}

# Whether root DIR has its 3.15 virtualenv made (or tried) for this recipe.
venv_done() {
	for f in "$1$VENVS"/3.15.*/.ready "$1$VENVS"/3.15.*/.failed; do
		# A venv without its pyvenv.cfg is no venv (its python is the
		# root's, which finds sid's 3.14-only Numba): made again.
		case $f in */.ready) [ -f "${f%/.ready}/pyvenv.cfg" ] || continue ;; esac
		[ "$(cat "$f" 2>/dev/null)" = "$VENV_PKGS" ] && return 0
	done
	return 1
}

# Writes the recipe and the package list the root was made from.
stamp() {
	echo "$SIDROOT_REV" > "$1/.strata-sidroot-rev"
	echo "$PKGS" > "$1/.strata-sidroot-pkgs"
}

create() {
	new="$ROOT.new"
	rm -rf "$new"
	mkdir -p "$new"
	say "creating the sid root in $ROOT (debootstrap from $MIRROR)"
	if ! debootstrap --variant=minbase sid "$new" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1; then
		say "debootstrap failed (log: $CACHE/debootstrap.log)"
		rm -rf "$new"
		return 1
	fi
	echo "deb $MIRROR experimental main" > "$new/etc/apt/sources.list.d/experimental.list"
	cat > "$new/etc/apt/apt.conf.d/90strata" <<-EOF
		// A frozen snapshot: its Release files' dates are past.
		Acquire::Check-Valid-Until "false";
		APT::Install-Recommends "false";
	EOF
	# The host's apt proxies, for the root's apt.
	[ -z "${APT_HTTP_PROXY:-}" ] || echo "Acquire::http::Proxy \"$APT_HTTP_PROXY\";" >> "$new/etc/apt/apt.conf.d/90strata"
	[ -z "${APT_HTTPS_PROXY:-}" ] || echo "Acquire::https::Proxy \"$APT_HTTPS_PROXY\";" >> "$new/etc/apt/apt.conf.d/90strata"
	# Documentation is not needed in a test root: a smaller root is made faster.
	cat > "$new/etc/dpkg/dpkg.cfg.d/90strata" <<-EOF
		path-exclude /usr/share/doc/*
		path-exclude /usr/share/man/*
		path-exclude /usr/share/locale/*
		path-exclude /usr/share/info/*
	EOF
	say "installing $(echo $PKGS | wc -w) packages (python3.14, python3.15 from experimental, build and test tools)"
	if ! install_pkgs "$new"; then
		say "installing the packages failed"
		rm -rf "$new"
		return 1
	fi
	stamp "$new"
	rm -rf "$ROOT.old"
	[ -d "$ROOT" ] && mv "$ROOT" "$ROOT.old"
	mv "$new" "$ROOT"
	rm -rf "$ROOT.old"
}

update() {
	say "the package list changed: installing it into $ROOT"
	install_pkgs "$ROOT" || { say "installing the packages failed"; return 1; }
	stamp "$ROOT"
}

# Creates or updates the root as needed. Holds the cache's lock while it
# does, so concurrent runs wait instead of building twice.
ensure() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/lock"
	flock 9
	state=ok
	if [ ! -x "$ROOT/usr/bin/python3.15" ] || [ "$(cat "$ROOT/.strata-sidroot-rev" 2>/dev/null)" != "$SIDROOT_REV" ]; then
		state=create
	elif [ "$(cat "$ROOT/.strata-sidroot-pkgs" 2>/dev/null)" != "$PKGS" ]; then
		state=update
	fi
	if [ $state != ok ]; then
		apt_proxy
		if ! find_mirror; then
			if [ $state = update ]; then
				say "no Debian archive serving sid could be reached (tried: $TRIED) to update the root; using it as it is"
			else
				skip "no Debian archive serving sid could be reached (tried: $TRIED; STRATA_SID_MIRROR=URL names one), and no sid root is cached in $ROOT: CPython 3.14 and 3.15 are not tested"
			fi
		else
			need_debootstrap || skip "debootstrap is not installed and cannot be (apt-get install debootstrap)"
			$state || exit 1
		fi
	fi
	venv_done "$ROOT" || venv_315 "$ROOT"
	venv_extras "$ROOT"
	venv_pytest "$ROOT"
	# Runs share the root; a later update waits for them.
	flock -s 9
}

# What `check` needs built in the root: strata, and two helpers of the unit
# tests the suite runs (`make func` keeps them current on the host):
# synthprof and test_export_web.
prepare() {
	in_root "$ROOT" make -j"$(nproc)" PYTHONS="$INTERPS" BUILD=build-sid all \
		build-sid/tests/synthprof build-sid/unit/test_export_web
}

# ---- commands ---------------------------------------------------------------

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
case "$cmd" in
ensure)
	ensure
	echo "$ROOT"
	;;
run)
	[ $# -gt 0 ] || usage
	ensure
	in_root "$ROOT" "$@"
	;;
shell)
	ensure
	in_root "$ROOT" bash -i
	;;
build)
	ensure
	in_root "$ROOT" make -j"$(nproc)" PYTHONS="$INTERPS" BUILD=build-sid "$@"
	;;
prepare)
	ensure
	prepare
	;;
check)
	ensure
	prepare
	[ $# -gt 0 ] || set -- tests/func
	# Debian's interpreters are the test ids debian-3.14 and debian-3.15;
	# /usr/bin/python3 (3.14 in sid) is the debian_python of the tests,
	# and the one the version-independent (edge_pythons) tests run under,
	# as Debian's does on the host (STRATA_TEST_EVERY_PYTHON=1: both).
	# One pytest worker per core, not one more as on the host
	# (scripts/run-func-tests.sh): make check runs this suite beside the
	# host's regression tests and the wheel matrix, which keep every core
	# busy already; one more worker there failed load-bound tests
	# (test_why_threads_wait, test_attach_split on 3.15) and saved 20 s.
	jobs=${STRATA_TEST_JOBS:-$(nproc)}
	par=""
	[ "$jobs" -gt 1 ] && par="-n $jobs"
	in_root "$ROOT" env STRATA_BUILD="$top/build-sid" STRATA_TEST_PYTHONS="debian-3.14 debian-3.15" \
		STRATA_TEST_EDGE_PYTHONS="debian-3.14" ${STRATA_TEST_EVERY_PYTHON:+STRATA_TEST_EVERY_PYTHON=1} \
		STRATA_VENVS="$VENVS" \
		python3 -m pytest -p no:cacheprovider -ra --durations=15 $par "$@"
	;;
regrtests)
	ensure
	in_root "$ROOT" make -j"$(nproc)" PYTHONS="$INTERPS" BUILD=build-sid all
	in_root "$ROOT" python3 tests/cpython/run_regrtests.py --python debian-3.14 --python debian-3.15 \
		--strata "$top/build-sid/bin/strata" --workdir "$top/build-sid/cpython-tests" "$@"
	;;
*)
	usage
	;;
esac

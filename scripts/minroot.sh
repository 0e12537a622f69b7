#!/bin/sh
# minroot.sh — minimal Debian roots for testing the wheel (issue 22) where
# nothing of ours is installed: debootstrap --variant=minbase with python3,
# python3-venv and python3-pip only (no compiler, no -dev package, no
# elfutils), from this machine's own Debian mirror (scripts/apt-mirror.sh).
#
#   scripts/minroot.sh ensure SUITE        create the root if needed; print its path
#   scripts/minroot.sh run SUITE CMD [ARG...]
#                                          run CMD (as root) in a fresh copy of it
#
# SUITE: bookworm (Debian 12), trixie (Debian 13); and sid, the root
# scripts/sidroot.sh makes, which `run` uses as it is (never creates).
#
# A root is cached in /var/cache/strata/SUITE/root ($STRATA_ROOTS_DIR for
# /var/cache/strata): made once (debootstrap, about a minute), and again
# only when its recipe (MINROOT_REV, the package list) changes. `run`
# never changes it: CMD runs on an overlay whose upper layer is a tmpfs
# that ends with the run, so every run starts from the root as made (the
# users it adds, what pip installs there, all gone after), and runs in
# parallel do not see each other. Like sidroot.sh, each run has its own
# mount namespace (/proc, /sys, /dev and the checkout at its own path are
# mounted there, and the kernel drops them when the run ends); the
# environment is empty but for PATH, HOME, LANG, TERM.
#
# The cache's lock (SUITE/lock, the same one sidroot.sh takes) is held
# exclusively while a root is made and shared while one runs.
#
# Exit status: CMD's; 77 after ONE line (minroot.sh: skipped: ...) when
# this machine cannot have the root (not root, no Debian mirror, mirror
# unreachable, no debootstrap); 1 when making it failed; 2 for usage.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
SKIP=77
MINROOT_REV=1
PKGS="python3 python3-venv python3-pip"
ROOTS=${STRATA_ROOTS_DIR:-/var/cache/strata}

say() { echo "minroot.sh: $*" >&2; }
skip() { echo "minroot.sh: skipped: $*" >&2; exit $SKIP; }

usage() {
	sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[ $# -ge 2 ] || usage
cmd=$1
suite=$2
shift 2
case "$suite" in
bookworm | trixie | sid) ;;
*) say "unknown suite $suite (bookworm, trixie or sid)"; exit 2 ;;
esac
CACHE=$ROOTS/$suite
ROOT=$CACHE/root

if [ "$(id -u)" -ne 0 ]; then
	# debootstrap, chroot and mounts need root: run this script again under sudo.
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		exec sudo -n -E sh "$0" "$cmd" "$suite" "$@"
	fi
	skip "needs root (or sudo without a password) for debootstrap, chroot and mounts"
fi

# ---- making a root ----------------------------------------------------------

recipe() { echo "$MINROOT_REV $PKGS"; }

create() {
	mirror=$(sh "$top/scripts/apt-mirror.sh") || skip "no Debian mirror to make the $suite root from (the line above)"
	proxy=$(sh "$top/scripts/apt-mirror.sh" proxy)
	if [ -n "$proxy" ]; then
		export http_proxy="$proxy"
	fi
	if ! command -v debootstrap >/dev/null 2>&1; then
		say "installing debootstrap"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 ||
			skip "debootstrap is not installed and cannot be (apt-get install debootstrap)"
	fi
	new=$ROOT.new
	rm -rf "$new"
	mkdir -p "$new"
	say "creating the $suite root in $ROOT (debootstrap --variant=minbase from $mirror, with $PKGS)"
	# --include resolves the packages' dependencies: one debootstrap run,
	# no apt in the root afterwards.
	if ! debootstrap --variant=minbase --include="$(echo $PKGS | tr ' ' ,)" "$suite" "$new" "$mirror" \
		> "$CACHE/debootstrap.log" 2>&1; then
		if grep -q "Failed getting release file\|Couldn't download\|Temporary failure\|unable to connect" "$CACHE/debootstrap.log"; then
			rm -rf "$new"
			skip "cannot reach $mirror to make the $suite root (log: $CACHE/debootstrap.log)"
		fi
		say "debootstrap failed (log: $CACHE/debootstrap.log)"
		rm -rf "$new"
		return 1
	fi
	# apt in the root (a user's own use) takes the same proxy; the archive
	# may be a frozen snapshot, whose Release dates are past.
	{
		echo 'Acquire::Check-Valid-Until "false";'
		[ -n "$proxy" ] && echo "Acquire::http::Proxy \"$proxy\";"
	} > "$new/etc/apt/apt.conf.d/90strata"
	apt-get clean -o RootDir="$new" >/dev/null 2>&1 || rm -rf "$new"/var/cache/apt/archives/*.deb
	recipe > "$new/.strata-minroot"
	rm -rf "$ROOT.old"
	[ -d "$ROOT" ] && mv "$ROOT" "$ROOT.old"
	mv "$new" "$ROOT"
	rm -rf "$ROOT.old"
}

# Takes the cache's lock on fd 9: exclusive while the root is made or
# checked, then shared for the rest of this process (the run).
ensure() {
	mkdir -p "$CACHE"
	exec 9>"$CACHE/lock"
	if [ "$suite" = sid ]; then
		flock -s 9
		[ -x "$ROOT/usr/bin/python3" ] || skip "no sid root in $ROOT (scripts/sidroot.sh ensure makes it)"
		return 0
	fi
	# Shared while it is looked at, as while it runs: runs of a current
	# root side by side (make check-wheel's user and venv jobs) never
	# wait for each other. Made under the exclusive lock, which waits for
	# the runs of the old one to end, and looked at again there (another
	# run may have just made it).
	flock -s 9
	if [ "$(cat "$ROOT/.strata-minroot" 2>/dev/null)" != "$(recipe)" ]; then
		flock 9
		if [ "$(cat "$ROOT/.strata-minroot" 2>/dev/null)" != "$(recipe)" ]; then
			create || exit 1
		fi
		flock -s 9
	fi
}

# ---- running in a fresh copy ------------------------------------------------

# in_root CMD...: CMD in an overlay of the root (upper layer: a tmpfs of
# this run), in a private mount namespace, at the checkout.
in_root() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/strata-minroot.XXXXXX")
	rc=0
	unshare --mount --propagation private -- sh -c '
		set -e
		root=$1 work=$2 top=$3 term=$4
		shift 4
		mount -t tmpfs -o mode=0755 tmpfs "$work"
		mkdir "$work/upper" "$work/work" "$work/merged"
		r=$work/merged
		mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/work" "$r"
		mount -t proc proc "$r/proc"
		mount --rbind /sys "$r/sys"
		mount --rbind /dev "$r/dev"
		mountpoint -q "$r/dev/pts" || mount -t devpts -o newinstance,ptmxmode=0666 devpts "$r/dev/pts"
		mountpoint -q "$r/dev/shm" || mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
		mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
		mkdir -p "$r$top"
		mount --bind "$top" "$r$top"
		exec chroot "$r" /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$top" /usr/bin/env -i \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LANG=C.UTF-8 TERM="$term" "$@"
	' sh "$ROOT" "$work" "$top" "${TERM:-dumb}" "$@" || rc=$?
	rmdir "$work" 2>/dev/null || true
	return $rc
}

case "$cmd" in
ensure)
	[ $# -eq 0 ] || usage
	ensure
	echo "$ROOT"
	;;
run)
	[ $# -gt 0 ] || usage
	ensure
	in_root "$@"
	;;
*)
	usage
	;;
esac

#!/bin/sh
# inroot.sh — runs inside a minimal Debian root (scripts/minroot.sh run),
# as root: checks that the root has none of strata's build tools, adds an
# ordinary user, and as that user installs the wheel the way the user
# would and runs tests/wheel/battery.py against it.
#
#   inroot.sh user|venv WHEEL STAGE LABEL
#
#   user   pip install --user (--break-system-packages: Debian 12 and later
#          mark their Python externally managed, PEP 668, and pip refuses a
#          --user install without it), then ~/.local/bin/strata
#   venv   python3 -m venv ~/venv; ~/venv/bin/pip install WHEEL; the venv's
#          strata also profiles /usr/bin/python3 (another interpreter)
#
# STAGE holds battery.py and programs/ (tests/wheel/matrix.py prepares it).
# No network is used: the wheel is installed from its file (--no-index).
set -eu

how=$1
wheel=$2
stage=$3
label=$4
user=strata-test

# What this root must not have: strata needs none of it once built.
for tool in cc gcc make eu-readelf; do
	if command -v "$tool" >/dev/null 2>&1; then
		echo "FAIL $label root: $tool is installed here; the root should have none of strata's build tools"
		exit 1
	fi
done
for lib in libdw.so.1 libelf.so.1 libcapstone.so.4 libcapstone.so.5; do
	if [ -n "$(find /usr/lib /lib -name "$lib" 2>/dev/null | head -n 1)" ]; then
		echo "FAIL $label root: $lib is installed here; it should come from the wheel"
		exit 1
	fi
done
if ls /usr/include/python3* >/dev/null 2>&1; then
	echo "FAIL $label root: Python headers are installed here"
	exit 1
fi
echo "ok $label root: $(. /etc/os-release && echo "$PRETTY_NAME"), $(python3 --version), no compiler, no -dev package, no elfutils"

useradd --create-home --shell /bin/sh "$user"
home=/home/$user
cp -r "$stage" "$home/t"
cp "$wheel" "$home/t/"
chown -R "$user:$user" "$home/t"
w=$home/t/$(basename "$wheel")

# Attaching (record --pid) and strata stack trace a process of the same
# user; a Yama ptrace_scope above 0 forbids that for non-descendants.
extra=""
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent)
case "$scope" in
0 | absent) ;;
*) extra="--skip-ptrace kernel.yama.ptrace_scope=$scope forbids an ordinary user to trace its own processes" ;;
esac

as_user() {
	runuser -u "$user" -- env -i HOME="$home" LANG=C.UTF-8 PATH="$home/.local/bin:/usr/local/bin:/usr/bin:/bin" \
		PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 "$@"
}

secs() { python3 -c 'import sys; print("%.1f s" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2"; }

case "$how" in
user)
	t0=$(date +%s.%N)
	as_user python3 -m pip install -q --user --break-system-packages --no-index "$w"
	t1=$(date +%s.%N)
	echo "ok $label pip-install-user $(secs "$t0" "$t1")"
	# shellcheck disable=SC2086
	as_user python3 "$home/t/battery.py" --label "$label" --strata "$home/.local/bin/strata" \
		--python /usr/bin/python3 --programs "$home/t/programs" --work "$home/work" $extra
	;;
venv)
	as_user python3 -m venv "$home/venv"
	t0=$(date +%s.%N)
	as_user "$home/venv/bin/pip" install -q --no-index "$w"
	t1=$(date +%s.%N)
	echo "ok $label pip-install-venv $(secs "$t0" "$t1")"
	# shellcheck disable=SC2086
	as_user python3 "$home/t/battery.py" --label "$label" --strata "$home/venv/bin/strata" \
		--python "$home/venv/bin/python" --other /usr/bin/python3 --programs "$home/t/programs" \
		--work "$home/work" $extra
	;;
*)
	echo "usage: inroot.sh user|venv WHEEL STAGE LABEL" >&2
	exit 2
	;;
esac

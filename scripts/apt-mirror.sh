#!/bin/sh
# apt-mirror.sh — the Debian mirror (and proxy) this machine's apt uses, for
# the scripts that make Debian roots with debootstrap (scripts/minroot.sh;
# scripts/sidroot.sh can use it too): a root is made from the mirror the
# machine is configured for, never from a host named in our code.
#
#   scripts/apt-mirror.sh          prints the mirror's URI (one line)
#   scripts/apt-mirror.sh proxy    prints apt's HTTP proxy, or nothing
#
# The mirror is the URI of the first enabled `deb` entry, in apt's own
# order (sources.list, then sources.list.d/*.list and *.sources by name;
# both the one-line and the deb822 format), whose suite is a Debian
# release (the machine's own codename, or stable, testing, unstable, sid,
# experimental, or a named release), not its -security, -updates or
# -backports suites, which live elsewhere or hold only a part of the
# archive. STRATA_APT_MIRROR overrides it. Exit status 1, after one line
# saying why, when no such entry exists (a machine that is not Debian).
set -eu

etc=${STRATA_APT_ETC:-/etc/apt}

if [ "${1:-}" = proxy ]; then
	# Acquire::http::Proxy "http://...";  (apt-config knows every file)
	if command -v apt-config >/dev/null 2>&1; then
		apt-config dump 2>/dev/null | sed -n 's/^Acquire::http::Proxy "\(.*\)";$/\1/p' | head -n 1
	fi
	exit 0
fi

if [ -n "${STRATA_APT_MIRROR:-}" ]; then
	echo "$STRATA_APT_MIRROR"
	exit 0
fi

codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}") || codename=""
releases="$codename stable testing unstable sid experimental buster bullseye bookworm trixie forky duke"

files=""
[ -f "$etc/sources.list" ] && files="$etc/sources.list"
for f in "$etc"/sources.list.d/*.list "$etc"/sources.list.d/*.sources; do
	[ -f "$f" ] && files="$files $f"
done
# apt reads sources.list.d in name order, whatever the extension.
files=$(for f in $files; do echo "$f"; done | awk '{ n = $0; sub(".*/", "", n); print (NR == 1 && $0 ~ /sources\.list$/ ? "" : n) "\t" $0 }' |
	sort -t "$(printf '\t')" -k1,1 | cut -f2)

# Every file, printed as "URI SUITE" lines of enabled deb entries, in order.
entries() {
	for f in $files; do
		case "$f" in
		*.sources)
			awk '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && enabled != "no")
					for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j]
				types = ""; enabled = ""; nu = 0; ns = 0
			}
			/^#/ { next }
			/^[ \t]*$/ { flush(); next }
			{
				key = tolower($1); sub(":$", "", key)
				val = $0; sub("^[^:]*:[ \t]*", "", val)
				if (key == "types") types = val
				else if (key == "enabled") enabled = tolower(val)
				else if (key == "uris") nu = split(val, u, /[ \t]+/)
				else if (key == "suites") ns = split(val, s, /[ \t]+/)
			}
			END { flush() }' "$f"
			;;
		*)
			# deb [options] URI SUITE COMPONENTS...
			sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 { print $2, $3 }'
			;;
		esac
	done
}

mirror=$(entries | while read -r uri suite; do
	case " $releases " in *" $suite "*) echo "$uri"; break ;; esac
done)
if [ -z "$mirror" ]; then
	echo "apt-mirror.sh: no Debian archive among apt's sources ($etc): set STRATA_APT_MIRROR to a Debian mirror" >&2
	exit 1
fi
echo "${mirror%/}"

#!/usr/bin/env bash
# Installs the Debian packages hotlane's build, tests and VM runner need,
# skipping those already present. Idempotent; run as root.
#   qemu-system-x86              the sched_ext VM (TCG); from bookworm-backports
#                                on bookworm, see below
#   clang-19 llvm-19 libelf-dev
#   zlib1g-dev make gcc          building the upstream scx_simple (and `make generate`)
#   bpftool                      `make vmlinux`
#   zstd xz-utils                decompressing kernel images
#   iproute2                     veth/netns for the XDP tests
#   git                          `make lint` lists the Go files with git ls-files
#   rt-tests stress-ng           outside measuring tools (cyclictest) and load,
#                                copied into the VM's initramfs by the tests
#   linux-perf sysbench rt-app   outside judges of the whole machine (perf bench
#                                sched, sysbench, rt-app), copied into the VM
#                                by the tests and by `hotlane vm --judges`
#   clang-22 llvm-22             building scx_qmap (clang 19's build fails the
#                                kernel's verifier); from bookworm-security where
#                                the host has it, else skipped with a warning
#   debian-archive-keyring       2023.3+deb12u2 or newer: the VM kernel comes
#                                from trixie-backports, signed with the trixie key
#
#   scripts/deps.sh                 install what is missing
#   scripts/deps.sh --print-mirror  print the Debian mirror the host's apt uses
#   scripts/deps.sh --kernel-build  also what building a VM kernel from source
#                                   needs (`make kernel-6.12`): flex bison
#                                   dwarves (pahole, for BTF) bc libssl-dev
#
# HOTLANE_APT_ETC (default /etc/apt) is where the host's apt sources are
# read from; the tests point it at fixture directories.
set -euo pipefail

APT_ETC=${HOTLANE_APT_ETC:-/etc/apt}

# The Debian mirror the host's apt already uses. apt itself parses the
# sources (deb822 .sources, one-line sources.list and .list files, any mix),
# so no format is ours to get wrong. Preferred: a source carrying one of
# Debian's suites that is not a security archive.
host_mirror() {
	apt-get -o "Dir::Etc=$APT_ETC" -o "Dir::Etc::SourceList=$APT_ETC/sources.list" \
		-o "Dir::Etc::SourceParts=$APT_ETC/sources.list.d" \
		indextargets --no-release-info --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
		awk '$1 !~ /security/ && $2 !~ /security/ &&
			$2 ~ /^(buster|bullseye|bookworm|trixie|forky|duke|sid|unstable|testing|stable|oldstable)(-updates|-backports)?$/ {
			sub(/\/$/, "", $1); print $1; exit }'
}

if [ "${1:-}" = --print-mirror ]; then
	m=$(host_mirror)
	[ -n "$m" ] || { echo "hotlane: no Debian mirror in the apt sources under $APT_ETC (sources.list, sources.list.d/*.list or *.sources)" >&2; exit 1; }
	echo "$m"
	exit 0
fi

# grep reads to the end (no -q) in these pipes: under pipefail, grep -q
# leaving at the first match kills the writer with SIGPIPE and turns a
# match into a failure, as it did for clang-22 once apt-cache policy
# printed more than one write's worth.
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep "ok installed" >/dev/null; }
version_ge() { installed "$1" && dpkg --compare-versions "$(dpkg-query -W -f='${Version}' "$1")" ge "$2"; }

# apt's output goes to a log; when a step fails its tail is shown, so a
# failing install is never silent.
log=$(mktemp /tmp/hotlane-deps.XXXXXX)
trap 'rm -f "$log"' EXIT
apt_step() {
	if ! "$@" >"$log" 2>&1; then
		echo "hotlane: '$*' failed:" >&2
		tail -n 20 "$log" >&2
		exit 1
	fi
}

want=(clang-19 llvm-19 libelf-dev zlib1g-dev make gcc bpftool zstd xz-utils iproute2 git rt-tests stress-ng linux-perf sysbench rt-app)
[ "${1:-}" = --kernel-build ] && want+=(flex bison dwarves bc libssl-dev)
missing=()
for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done
version_ge debian-archive-keyring 2023.3+deb12u2 || missing+=(debian-archive-keyring)
optional=()
for p in clang-22 llvm-22; do installed "$p" || optional+=("$p"); done

# bookworm's qemu 7.2 races with the guest kernel's live code patching
# under multi-threaded TCG (guests die with "Oops: int3" or in the middle of
# a patched nop when sched_ext flips its static keys); qemu 10 from
# bookworm-backports does not. Backports is used through a private sources
# list so the host's apt configuration stays untouched.
. /etc/os-release
qemu_ok() {
	installed qemu-system-x86 || return 1
	[ "${VERSION_CODENAME:-}" != bookworm ] && return 0
	version_ge qemu-system-x86 1:10
}
need_qemu=0
qemu_ok || need_qemu=1

[ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && [ $need_qemu -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "hotlane: missing packages: ${missing[*]} ${optional[*]} $([ $need_qemu -eq 1 ] && echo qemu-system-x86); run 'make deps' as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "hotlane: updating the package lists"
apt_step apt-get update -q
for p in "${optional[@]}"; do
	if apt-cache policy "$p" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; then
		missing+=("$p")
	else
		echo "hotlane: warning: $p is not in the host's apt sources (bookworm-security has it); scx_qmap will be built with an older clang, which the kernel's verifier rejects" >&2
	fi
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "hotlane: installing ${missing[*]}"
	apt_step apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
[ $need_qemu -eq 1 ] || exit 0
if [ "${VERSION_CODENAME:-}" != bookworm ]; then
	echo "hotlane: installing qemu-system-x86"
	apt_step apt-get install -y -q --no-install-recommends qemu-system-x86
	exit 0
fi
mirror=$(host_mirror)
if [ -z "$mirror" ]; then
	echo "hotlane: no Debian mirror in the apt sources under $APT_ETC; qemu 10 comes from bookworm-backports on that mirror." >&2
	echo "hotlane: add a Debian source (e.g. /etc/apt/sources.list.d/debian.sources) or install qemu-system-x86 >= 10 yourself." >&2
	exit 1
fi
dir=${HOTLANE_CACHE:-$HOME/.cache/hotlane}/apt/host-backports
mkdir -p "$dir/lists/partial" "$dir/archives/partial"
key=/usr/share/keyrings/debian-archive-keyring.gpg
cat > "$dir/sources.list" <<-LIST
	deb [signed-by=$key] $mirror bookworm main
	deb [signed-by=$key] $mirror bookworm-updates main
	deb [signed-by=$key] $mirror bookworm-backports main
LIST
opts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	-o "Dir::State::Lists=$dir/lists" -o "Dir::Cache::Archives=$dir/archives")
echo "hotlane: installing qemu-system-x86 from bookworm-backports ($mirror)"
apt_step apt-get "${opts[@]}" update -q
apt_step apt-get "${opts[@]}" install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86

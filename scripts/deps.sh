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
#   dpkg-dev                     installed since the first setup; no step is known to need it
#   git                          `make lint` lists the Go files with git ls-files
set -euo pipefail

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }

want=(clang-19 llvm-19 libelf-dev zlib1g-dev make gcc bpftool zstd xz-utils iproute2 dpkg-dev git)
missing=()
for p in "${want[@]}"; do installed "$p" || missing+=("$p"); done

# bookworm's qemu 7.2 races with the guest kernel's live code patching
# under multi-threaded TCG (guests die with "Oops: int3" or in the middle of
# a patched nop when sched_ext flips its static keys); qemu 10 from
# bookworm-backports does not. Backports is used through a private sources
# list so the host's apt configuration stays untouched.
. /etc/os-release
qemu_ok() {
	installed qemu-system-x86 || return 1
	[ "${VERSION_CODENAME:-}" != bookworm ] && return 0
	dpkg --compare-versions "$(dpkg-query -W -f='${Version}' qemu-system-x86)" ge 1:10
}
need_qemu=0
qemu_ok || need_qemu=1

[ ${#missing[@]} -eq 0 ] && [ $need_qemu -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "hotlane: missing packages: ${missing[*]} $([ $need_qemu -eq 1 ] && echo qemu-system-x86); run 'make deps' as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -gt 0 ]; then
	echo "hotlane: installing ${missing[*]}"
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_qemu -eq 1 ]; then
	if [ "${VERSION_CODENAME:-}" != bookworm ]; then
		echo "hotlane: installing qemu-system-x86"
		apt-get update -q >/dev/null
		apt-get install -y -q --no-install-recommends qemu-system-x86 >/dev/null
		exit 0
	fi
	# The mirror the host already uses, with the backports suite added.
	mirror=$( (grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
		grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | sed 's/\[[^]]*\]//' | awk '{print $2}') |
		grep -v security | head -n1)
	[ -n "$mirror" ] || { echo "hotlane: no Debian mirror in the host's apt sources" >&2; exit 1; }
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
	echo "hotlane: installing qemu-system-x86 from bookworm-backports"
	apt-get "${opts[@]}" update -q >/dev/null
	apt-get "${opts[@]}" install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null
fi

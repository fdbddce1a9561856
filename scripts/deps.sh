#!/usr/bin/env bash
# Installs the Debian packages hotlane's build, tests and VM runner need,
# skipping those already present. Idempotent; run as root.
#   qemu-system-x86              the sched_ext VM (TCG)
#   clang-19 llvm-19 libelf-dev
#   zlib1g-dev make gcc          building the upstream scx_simple (and `make generate`)
#   bpftool                      `make vmlinux`
#   zstd xz-utils                decompressing kernel images
#   iproute2                     veth/netns for the XDP tests
set -euo pipefail
want=(qemu-system-x86 clang-19 llvm-19 libelf-dev zlib1g-dev make gcc bpftool zstd xz-utils iproute2 dpkg-dev)
missing=()
for p in "${want[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "hotlane: missing packages: ${missing[*]}; run 'make deps' as root" >&2
	exit 1
fi
echo "hotlane: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null

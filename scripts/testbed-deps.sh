#!/usr/bin/env bash
# Debian packages the testbed's real node needs (docs/testing.md, "Real node"); idempotent.
#
#   runc        the OCI runtime containerd's runc shim calls (crun 1.8 in Debian 12 is too old
#               for the runtime spec containerd 2.4 writes)
#   mmdebstrap  builds the Python image's root filesystem from Debian's mirror, offline of any
#               container registry
#   iproute2    `ip link del` removes the pod bridge on teardown
#   nftables    the `nft` command kube-proxy's nftables mode programs Service routing with
#               (its own `kube-proxy` tables; the kernel's nf_tables is built in)
#   gcc, libc6-dev  compile Kubernetes' own pause.c statically for the pause image
#
# Installs only what is missing, so a provisioned machine (or a second run) makes no network
# call at all. Needs root when something is missing; prints what it would install otherwise.
set -euo pipefail

needed=(runc mmdebstrap iproute2 nftables gcc libc6-dev)
missing=()
for pkg in "${needed[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "testbed deps: all present (${needed[*]})"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "testbed deps: missing ${missing[*]}; install them as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
echo "testbed deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"

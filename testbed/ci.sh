#!/usr/bin/env bash
# What CI runs before the integration tests: install the real node's Debian packages if missing,
# then build the testbed binaries and images, or reuse them.
#
# Cache these paths between CI runs (all outside the repository):
#   ${RUNPLANE_TESTBED_CACHE:-$HOME/.cache/runplane-testbed}   built binaries, keyed by versions,
#                                                               and the real node's images
#   $(go env GOMODCACHE)  and  $(go env GOCACHE)                Go module and build caches
# With the first one restored (and the packages installed) this script finishes in about a
# second.
set -euo pipefail

cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
PYTHON="${PYTHON:-python3}"

# runc, mmdebstrap, iproute2, gcc: the real node's runtime and image build (apt, root).
bash scripts/testbed-deps.sh
# The build needs only the standard library, so no Python dependency is installed first.
"$PYTHON" -m testbed build
bin_dir="$("$PYTHON" -c 'from testbed import build; print(build.bin_dir())')"
images_dir="$("$PYTHON" -c 'from testbed import build; print(build.images_dir())')"
for binary in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubelet containerd; do
    "$bin_dir/$binary" --version 2>/dev/null | head -n 1 | sed "s|^|$binary: |" || true
done
"$bin_dir/bridge" 2>&1 | head -n 1 | sed 's|^|cni: |' || true
"$("$PYTHON" -m testbed.build --print-helm)" version --short 2>/dev/null | sed 's|^|helm: |' || true
runc --version 2>/dev/null | head -n 1 | sed 's|^|runc: |' || true
du -sh "$(dirname "$bin_dir")" 2>/dev/null | sed 's/^/testbed cache: /'
du -sh "$images_dir" 2>/dev/null | sed 's/^/testbed images: /'

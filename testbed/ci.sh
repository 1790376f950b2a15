#!/usr/bin/env bash
# What CI runs before the integration tests: build the testbed binaries, or reuse them.
#
# Cache these paths between CI runs (all outside the repository):
#   ${RUNPLANE_TESTBED_CACHE:-$HOME/.cache/runplane-testbed}   built binaries, keyed by versions
#   $(go env GOMODCACHE)  and  $(go env GOCACHE)                Go module and build caches
# With the first one restored this script finishes in about a second.
set -euo pipefail

cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
PYTHON="${PYTHON:-python3}"

# The build needs only the standard library, so no Python dependency is installed first.
"$PYTHON" -m testbed build
bin_dir="$("$PYTHON" -c 'from testbed import build; print(build.bin_dir())')"
for binary in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do
    "$bin_dir/$binary" --version 2>/dev/null | head -n 1 | sed "s|^|$binary: |" || true
done
du -sh "$(dirname "$bin_dir")" 2>/dev/null | sed 's/^/testbed cache: /'

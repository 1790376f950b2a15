#!/usr/bin/env bash
# What CI runs before the integration tests: install the real node's Debian packages if missing,
# then build the testbed binaries and images, or reuse them.
#
# Cache these paths between CI runs (all outside the repository):
#   ${RUNPLANE_TESTBED_CACHE:-$HOME/.cache/runplane-testbed}   built binaries, keyed by versions,
#                                                               the real node's images and the
#                                                               runplane image, keyed by inputs
#   $(go env GOMODCACHE)  and  $(go env GOCACHE)                Go module and build caches
# With the first one restored (and the packages installed) this script finishes in about a
# second.
set -euo pipefail

cd "$(dirname "$0")/.."
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
    export PATH="$PATH:/usr/local/go/bin"
fi
PYTHON="${PYTHON:-python3}"

# runc, mmdebstrap, iproute2, nftables, gcc: the real node's runtime and image build (apt, root).
bash scripts/testbed-deps.sh
# The runplane image (docs/install.md, "Image"; cached in the same place, keyed by its inputs),
# built beside the Go builds: its Debian bootstrap and wheel downloads wait on the network more
# than on the CPU. Its log is shown when it ends.
image_log="$(mktemp)"
"$PYTHON" -m testbed image >"$image_log" 2>&1 &
image_pid=$!
# The chart's PostgreSQL for the real node (testbed/postgres_image.py), likewise.
postgres_log="$(mktemp)"
"$PYTHON" -m testbed postgresql-image >"$postgres_log" 2>&1 &
postgres_pid=$!
# The Spark image for spark functions on the real node (testbed/spark_image.py), likewise.
spark_log="$(mktemp)"
"$PYTHON" -m testbed spark-image >"$spark_log" 2>&1 &
spark_pid=$!
# The build needs only the standard library, so no Python dependency is installed first.
"$PYTHON" -m testbed build
if ! wait "$image_pid"; then
    cat "$image_log" >&2
    rm -f "$image_log"
    echo "the runplane image did not build" >&2
    exit 1
fi
if ! wait "$postgres_pid"; then
    cat "$postgres_log" >&2
    rm -f "$postgres_log"
    echo "the PostgreSQL image did not build" >&2
    exit 1
fi
if ! wait "$spark_pid"; then
    cat "$spark_log" >&2
    rm -f "$spark_log"
    echo "the Spark image did not build" >&2
    exit 1
fi
cat "$spark_log"
rm -f "$spark_log"
grep -v '^[+#]' "$postgres_log" || true
rm -f "$postgres_log"
grep -v '^[+#]' "$image_log" | grep -v -P '^(debian|wheel)\t' || true
grep -c -P '^debian\t' "$image_log" | sed 's/^/runplane image: Debian packages: /'
grep -c -P '^wheel\t' "$image_log" | sed 's/^/runplane image: wheels: /'
rm -f "$image_log"
bin_dir="$("$PYTHON" -c 'from testbed import build; print(build.bin_dir())')"
images_dir="$("$PYTHON" -c 'from testbed import build; print(build.images_dir())')"
for binary in etcd kube-apiserver kube-controller-manager kube-scheduler kwok kubelet kube-proxy containerd; do
    "$bin_dir/$binary" --version 2>/dev/null | head -n 1 | sed "s|^|$binary: |" || true
done
"$bin_dir/bridge" 2>&1 | head -n 1 | sed 's|^|cni: |' || true
"$("$PYTHON" -m testbed.build --print-helm)" version --short 2>/dev/null | sed 's|^|helm: |' || true
"$("$PYTHON" -c 'from testbed import spark_build; print(spark_build.operator_binary())')" version 2>/dev/null | head -n 1 | sed 's|^|spark-operator: |' || true

# The MPI Operator and its MPI image (built beside the rest by `testbed build`).
"$("$PYTHON" -m testbed.build --print-mpi-operator)" --version 2>/dev/null | grep '^Version' | sed 's|^|mpi-operator: |' || true
du -sh "$("$PYTHON" -c 'from testbed import build; print(build.mpi_image_archive())')" 2>/dev/null | sed 's/^/mpi image: /' || true

"$("$PYTHON" -m testbed.build --print-metrics-server)" --version 2>/dev/null | sed 's|^|metrics-server: |' || true
runc --version 2>/dev/null | head -n 1 | sed 's|^|runc: |' || true
du -sh "$(dirname "$bin_dir")" 2>/dev/null | sed 's/^/testbed cache: /'
du -sh "$images_dir" 2>/dev/null | sed 's/^/testbed images: /'

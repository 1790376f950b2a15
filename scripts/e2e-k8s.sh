#!/usr/bin/env bash
# The path a user takes to Kubernetes, end to end, on this machine (docs/testing.md):
#   the testbed with its real kubelet node  ->  `runplane serve` against it  ->
#   `runplane run examples/train.py` through the service, the result computed in a pod.
# Needs root (the real node) and what `bash scripts/setup.sh` and `bash testbed/ci.sh` set up.
# Leaves nothing running: the service and the testbed are stopped on exit, even on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=.venv/bin/python
work="$(mktemp -d /tmp/runplane-e2e.XXXXXX)"
service_pid=""
run_dir=""

cleanup() {
    # Every step runs whatever the one before it returned (a service stopped by SIGTERM
    # exits 143), so nothing is left behind.
    set +e
    if [ -n "$service_pid" ]; then
        kill "$service_pid" 2>/dev/null
        wait "$service_pid" 2>/dev/null
    fi
    [ -n "$run_dir" ] && "$PYTHON" -m testbed down --run-dir "$run_dir" >/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

echo "== testbed: control plane and one real node, no kwok nodes"
"$PYTHON" -m testbed up --real-node --detach --on-demand 0 --spot 0 --gpu 0 --system 0 \
    | tee "$work/up.log"
run_dir="$(sed -n 's/^control plane ready in .* run dir //p' "$work/up.log")"
export KUBECONFIG="$run_dir/kubeconfig"

echo "== runplane serve, runs on the real node"
token="e2e-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
image="$("$PYTHON" -c 'from testbed import images; print(images.PYTHON_IMAGE)')"
toleration="$("$PYTHON" -c 'import json; from testbed import topology; print(json.dumps([topology.REAL_NODE_TOLERATION]))')"
port="$("$PYTHON" -c 'from testbed.serve import free_port; print(free_port())')"
env RUNPLANE_CONFIG=/dev/null \
    RUNPLANE_LOCAL__HOME="$work/home" \
    RUNPLANE_NAMESPACE=runplane-e2e \
    RUNPLANE_SERVICE__RUNTIME=kubernetes \
    RUNPLANE_SERVICE__KUBECONFIG="$KUBECONFIG" \
    RUNPLANE_SERVICE__TOKENS="[{\"token\": \"$token\", \"user\": \"me\", \"role\": \"user\"}]" \
    RUNPLANE_FUNCTION_DEFAULTS__IMAGE="$image" \
    RUNPLANE_FUNCTION_DEFAULTS__TOLERATIONS="$toleration" \
    .venv/bin/runplane serve --port "$port" >"$work/serve.log" 2>&1 &
service_pid=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/api/v1/health" >/dev/null && break
    kill -0 "$service_pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
    sleep 0.1
done
export RUNPLANE_API="http://127.0.0.1:$port" RUNPLANE_TOKEN="$token"
curl -sf -H "Authorization: Bearer $token" "$RUNPLANE_API/api/v1/cluster" \
    | "$PYTHON" -c 'import json, sys; print("cluster:", json.load(sys.stdin)["message"])'

echo "== runplane run examples/train.py --param epochs=4"
.venv/bin/runplane run examples/train.py --handler train --param epochs=4 --cpu 100m \
    | tee "$work/run.log"
grep -q "results .*loss=0.6561" "$work/run.log"
echo "== the result was computed in a pod on the real node"
uid="$(sed -n 's/^run  *\([0-9a-f]\{32\}\).*/\1/p' "$work/run.log")"
"$PYTHON" - "$uid" <<'PY'
import sys

from kubernetes import client, config

config.load_kube_config()
pods = client.CoreV1Api().list_namespaced_pod(
    "runplane-e2e", label_selector=f"runplane.io/run-uid={sys.argv[1]}"
).items
assert len(pods) == 1, f"expected one pod of run {sys.argv[1]}, found {len(pods)}"
pod = pods[0]
assert pod.spec.node_name == "vm", pod.spec.node_name
assert pod.status.phase == "Succeeded", pod.status.phase
print(f"pod {pod.metadata.name} on node {pod.spec.node_name}: {pod.status.phase}")
PY
echo "== e2e passed"

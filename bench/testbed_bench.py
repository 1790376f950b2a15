"""Benchmark the testbed: cold build time and cache size (from the build's own record), warm
start-up of the whole control plane, and how fast N nodes and M pods reach Running.

Run from the repository root:
    python bench/testbed_bench.py                      # 1000 nodes, 10000 pods
    python bench/testbed_bench.py --nodes 100 --pods 1000
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client

from testbed import build, cluster, kube, topology

PODS_PER_REPLICASET = 1000


def dir_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=False)
    return int(out.stdout.split()[0]) if out.returncode == 0 else 0


def go_env(name: str) -> Path:
    out = subprocess.run([build.go_binary(), "env", name], capture_output=True, text=True)
    return Path(out.stdout.strip())


def build_numbers() -> dict[str, Any]:
    """Cold numbers come from the first build that produced every binary, as recorded then."""
    record_path = build.key_dir() / build.TIMINGS_FILE
    records = json.loads(record_path.read_text()) if record_path.exists() else []
    full = [r for r in records if set(r["built"]) == set(build.BINARIES)]
    cold = full[0] if full else None
    return {
        "cache_key": build.cache_key(),
        "cold_build_s": cold["total_s"] if cold else None,
        "cold_build_steps_s": cold["steps_s"] if cold else None,
        "bin_dir_mb": round(dir_bytes(build.bin_dir()) / 1e6, 1),
        "go_mod_cache_mb": round(dir_bytes(go_env("GOMODCACHE")) / 1e6, 1),
        "go_build_cache_mb": round(dir_bytes(go_env("GOCACHE")) / 1e6, 1),
    }


def replicaset(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {topology.GROUP_LABEL: "bench"},
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/bench:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def scale_run(api: client.ApiClient, nodes: int, pods: int, timeout: float) -> dict[str, Any]:
    group = topology.NodeGroup("bench", nodes, 32, 128, "m5.8xlarge", max_pods=250)
    t0 = time.monotonic()
    topology.create_nodes(
        api, (topology.node_manifest(group, n, i) for i, n in enumerate(group.node_names()))
    )
    topology.wait_nodes_ready(api, group.node_names(), timeout=timeout)
    nodes_s = time.monotonic() - t0
    apps = client.AppsV1Api(api)
    ns = topology.RUNS_NAMESPACE
    sizes = [PODS_PER_REPLICASET] * (pods // PODS_PER_REPLICASET)
    if pods % PODS_PER_REPLICASET:
        sizes.append(pods % PODS_PER_REPLICASET)
    t1 = time.monotonic()
    for i, size in enumerate(sizes):
        body: Any = replicaset(f"bench-{i}", size)
        apps.create_namespaced_replica_set(ns, body)
    ready = 0
    deadline = t1 + timeout
    while ready < pods:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {ready}/{pods} pods ready after {timeout:.0f}s")
        time.sleep(1)
        items = apps.list_namespaced_replica_set(ns).items
        ready = sum((rs.status.ready_replicas or 0) if rs.status else 0 for rs in items)
    pods_s = time.monotonic() - t1
    core = client.CoreV1Api(api)
    running = len(core.list_namespaced_pod(ns, field_selector="status.phase=Running").items)
    return {
        "nodes": nodes,
        "pods": pods,
        "nodes_ready_s": round(nodes_s, 1),
        "pods_running_s": round(pods_s, 1),
        "pods_per_s": round(pods / pods_s, 1),
        "pods_running_checked": running,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    results: dict[str, Any] = {"command": shlex.join([Path(sys.executable).name, *sys.argv])}
    results["build"] = build_numbers()
    # Lease renewals are the dominant steady write load at 1000 nodes; renew less often.
    settings = cluster.Settings(
        node_lease_seconds=40, node_monitor_grace="60s", terminated_pod_gc_threshold=12500
    )
    t0 = time.monotonic()
    running = cluster.start(settings=settings, allow_build=False)
    try:
        results["warm_start_s"] = running.startup_seconds
        api = kube.api_client(running.kubeconfig)
        topology.seed(api, topology.node_groups())
        results["warm_start_with_topology_s"] = round(time.monotonic() - t0, 2)
        if not args.skip_scale:
            results["scale"] = scale_run(api, args.nodes, args.pods, args.timeout)
    finally:
        running.stop()
    results["run_dir"] = str(running.run_dir)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How fresh a kubelet's stats summary is: how long after a pod's memory grows the summary
(``/api/v1/nodes/NODE/proxy/stats/summary``, what the service samples runs' usage from) shows
it, on the testbed's real node, with kubelet's defaults and with each variant asked for.

A pod grows its memory by 32 MiB every ``--period`` seconds and prints when it did; this
script reads the summary through the API server every 0.1 s meanwhile. For each step, the
*lag* is from the pod's print to the first summary whose working set counts the step; the *age*
of an answer is its read time minus the time its memory figure says it was taken
(``memory.time``); *updates* is the time between two different ``memory.time`` values. All on
this machine's one clock. Needs root.

Run from the repository root:
    python bench/kubelet_stats_freshness.py
    python bench/kubelet_stats_freshness.py --variant --housekeeping-interval=1s
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client

from testbed import cluster, kube, realnode, topology

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import header

NAMESPACE = "bench-freshness"
STEP = 32 * 2**20
GROW = f"""\
import sys, time
steps, period = int(sys.argv[1]), float(sys.argv[2])
held = []
time.sleep(period)
for k in range(1, steps + 1):
    block = bytearray({STEP})
    for i in range(0, len(block), 4096):
        block[i] = 1
    held.append(block)
    print(k, time.time(), flush=True)
    time.sleep(period)
"""


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _pod_memory(summary: dict[str, Any], pod: str) -> tuple[int, float | None] | None:
    for entry in summary.get("pods") or []:
        if (entry.get("podRef") or {}).get("name") != pod:
            continue
        for container in entry.get("containers") or []:
            memory = container.get("memory") or {}
            if memory.get("workingSetBytes") is not None:
                return int(memory["workingSetBytes"]), _seconds(memory.get("time"))
    return None


def measure(
    api: client.ApiClient, node: realnode.RealNode, steps: int, period: float
) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    pod = f"grow-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(
        NAMESPACE,
        {
            "metadata": {"name": pod},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "nodeSelector": node.node_selector,
                "tolerations": [node.toleration],
                "containers": [
                    {
                        "name": "main",
                        "image": node.image,
                        "imagePullPolicy": "Never",
                        "command": ["python3", "-c", GROW, str(steps), str(period)],
                    }
                ],
            },
        },
    )
    reads: list[tuple[float, int, float | None]] = []
    last: dict[str, Any] = {}
    deadline = time.monotonic() + 120 + steps * period
    while True:
        phase = kube.pod_status(core.read_namespaced_pod(pod, NAMESPACE)).phase
        if phase in ("Succeeded", "Failed"):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"pod {pod} still {phase}")
        answer = core.connect_get_node_proxy_with_path(
            node.name, "stats/summary", _preload_content=False
        )
        read_at = time.time()
        summary = json.loads(answer.data)
        found = _pod_memory(summary, pod)
        if found is not None:
            reads.append((read_at, *found))
            last = next(p for p in summary["pods"] if p["podRef"]["name"] == pod)
        time.sleep(0.1)
    printed = core.read_namespaced_pod_log(pod, NAMESPACE)
    core.delete_namespaced_pod(pod, NAMESPACE, grace_period_seconds=0)
    stepped = [(int(k), float(at)) for k, at in (line.split() for line in printed.splitlines())]
    lags = []
    for k, at in stepped:
        seen = next((r for r, memory, _ in reads if r >= at and memory >= k * STEP), None)
        if seen is not None:
            lags.append(seen - at)
    ages = [r - taken for r, _, taken in reads if taken is not None]
    taken = sorted({t for _, _, t in reads if t is not None})
    updates = [b - a for a, b in itertools.pairwise(taken)]
    return {
        "steps": len(stepped),
        "steps_seen": len(lags),
        "lag_s": _spread(lags),
        "age_s": _spread(ages),
        "update_every_s": _spread(updates),
        "reads": len(reads),
        "last_cpu": [c.get("cpu") for c in last.get("containers") or []] + [last.get("cpu")],
    }


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
        "min": round(min(values), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--period", type=float, default=3.0)
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="kubelet flags measured after the defaults, one variant each (repeatable)",
    )
    args = parser.parse_args()
    header("kubelet stats summary freshness")
    running = cluster.start()
    api = kube.api_client(running.kubeconfig)
    topology.seed(api, topology.node_groups(0, 0, 0, 0))
    client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
    plain = realnode.kubelet_argv
    results = {}
    try:
        for variant in ["", *args.variant]:
            flags = variant.split()
            realnode.kubelet_argv = lambda *a, _f=flags: [*plain(*a), *_f]
            node = realnode.RealNode.start(running)
            try:
                results[variant or "defaults"] = measure(api, node, args.steps, args.period)
            finally:
                node.stop()
            print(json.dumps({variant or "defaults": results[variant or "defaults"]}), flush=True)
    finally:
        realnode.kubelet_argv = plain
        running.stop()
    for name, found in results.items():
        lag, age, every = found["lag_s"], found["age_s"], found["update_every_s"]
        print(
            f"{name:45s} lag median {lag and lag['median']} s max {lag and lag['max']} s; "
            f"age median {age and age['median']} s max {age and age['max']} s; "
            f"updated every {every and every['median']} s "
            f"({found['steps_seen']}/{found['steps']} steps seen, {found['reads']} reads)"
        )


if __name__ == "__main__":
    main()

"""Benchmark runs on the testbed's real kubelet node: from submission to the pod Running and to
Succeeded, for runplane's runs and, as the peer, for bare pods of the same image created with
the Kubernetes client; the node's own memory (kubelet, containerd); and the build times of the
pieces the real node adds, as their builds recorded them.

Both kinds are timed the same way: from just before the create (runplane: ``launch``) to the
moment a watch of the namespace, run by this script, first sees the pod Running, then
Succeeded. Runs go one at a time, so the numbers are latencies, not throughput. Needs root.

Run from the repository root:
    python bench/realnode_runs.py              # 50 runs of each
    python bench/realnode_runs.py --runs 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client, watch

import runplane
from runplane.config import load_settings
from runplane.runtimes.kubernetes import KubernetesRuntime
from runplane.runtimes.request import build_request
from testbed import build, cluster, kube, realnode, topology

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import header

NAMESPACE = "bench-real"
CODE = "def handler(context, x: int = 1):\n    return {'x': x}\n"


class Observer:
    """Watches the namespace and notes when each pod is first seen Running and Succeeded."""

    def __init__(self, api: client.ApiClient) -> None:
        self.seen: dict[str, dict[str, float]] = {}
        self._changed = threading.Condition()
        self._core = client.CoreV1Api(api)
        self._watch = watch.Watch()
        self._stopping = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            self._observe()
        except Exception:
            if not self._stopping.is_set():  # the cluster going down ends the watch: expected
                raise

    def _observe(self) -> None:
        for event in self._watch.stream(self._core.list_namespaced_pod, NAMESPACE):
            pod = event["object"]
            phase = pod.status.phase if pod.status else None
            with self._changed:
                times = self.seen.setdefault(pod.metadata.name, {})
                if phase in ("Running", "Succeeded", "Failed"):
                    times.setdefault("Running", time.monotonic())
                if phase in ("Succeeded", "Failed"):
                    times.setdefault(phase, time.monotonic())
                self._changed.notify_all()

    def until(self, name: str, phase: str, timeout: float = 120) -> float:
        with self._changed:
            if not self._changed.wait_for(lambda: phase in self.seen.get(name, {}), timeout):
                raise TimeoutError(f"pod {name} never reached {phase}: {self.seen.get(name)}")
            return self.seen[name][phase]

    def stop(self) -> None:
        self._stopping.set()
        self._watch.stop()


def bare_pod(name: str, node: realnode.RealNode) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": node.node_selector,
            "tolerations": [node.toleration],
            "containers": [
                {
                    "name": "main",
                    "image": node.image,
                    "command": ["python3", "-c", "print({'x': 1})"],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(len(ordered) * 0.99) - 1)]
    return f"p50 {statistics.median(ordered):.2f} s, p99 {p99:.2f} s (n={len(ordered)})"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    header("Runs on the real node: submission to Running and to Succeeded")

    build.build()
    running = cluster.start()
    api = kube.api_client(running.kubeconfig)
    topology.seed(api, topology.node_groups(0, 0, 0, 0))
    node = realnode.RealNode.start(running)
    core = client.CoreV1Api(api)
    runtime = None
    observer = None
    try:
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        observer = Observer(api)
        settings = load_settings(
            namespace=NAMESPACE,
            function_defaults={
                "image": node.image,
                "node_selector": node.node_selector,
                "tolerations": [node.toleration],
            },
        )
        runtime = KubernetesRuntime(settings, api=api)
        source = Path(running.run_dir) / "job.py"
        source.write_text(CODE)
        fn = runplane.code_to_function("job", filename=str(source), handler="handler")
        fn.with_requests(cpu="100m", mem="64Mi")
        memory = {
            p.name: rss_mb(p.pid) for p in node.processes if p.name in ("kubelet", "containerd")
        }

        results: dict[str, dict[str, list[float]]] = {}
        for kind in ("bare pod", "runplane run"):
            phases: dict[str, list[float]] = {"Running": [], "Succeeded": []}
            for _ in range(args.runs):
                uid = uuid.uuid4().hex
                began = time.monotonic()
                if kind == "runplane run":
                    request = build_request(fn, settings, uid=uid)
                    name = request.manifests[0]["metadata"]["name"]
                    runtime.launch(request)
                else:
                    name = f"bare-{uid[:12]}"
                    core.create_namespaced_pod(NAMESPACE, bare_pod(name, node))
                for phase, samples in phases.items():
                    samples.append(observer.until(name, phase) - began)
                core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
            results[kind] = phases
        memory_loaded = {
            p.name: rss_mb(p.pid) for p in node.processes if p.name in ("kubelet", "containerd")
        }
    finally:
        if observer is not None:
            observer.stop()
        if runtime is not None:
            runtime.close()
        node.stop()
        running.stop()

    for kind, phases in results.items():
        for phase, samples in phases.items():
            print(f"{kind:13} -> {phase:9}: {percentiles(samples)}")
    for phase in ("Running", "Succeeded"):
        ratio = statistics.median(results["runplane run"][phase]) / statistics.median(
            results["bare pod"][phase]
        )
        print(f"ratio runplane / bare pod, median to {phase}: {ratio:.2f}")
    print(f"node memory at start (MB): {json.dumps({k: round(v) for k, v in memory.items()})}")
    print(
        "node memory after the runs (MB): "
        + json.dumps({k: round(v) for k, v in memory_loaded.items()})
    )
    print(f"node start: {json.dumps(node.timings)}")
    for label, record in (("binaries", build.key_dir()), ("images", build.images_dir())):
        history = json.loads((record / build.TIMINGS_FILE).read_text())
        print(
            f"{label} build, first recorded (cold) and last: {history[0]['steps_s']}, "
            f"{history[-1]['steps_s']}"
        )


if __name__ == "__main__":
    main()

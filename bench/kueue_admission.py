"""Benchmark admission through Kueue beside runplane's own: N runs across P projects on K kwok
nodes, launched through the Kubernetes runtime, timed from the first launch until every run
is reported running; the runtime's process CPU per run (what a service spends in its runtime:
rendering, submitting, the watches, Kueue's Workload watch) on the same cluster, first without
Kueue, then with it (its default setup: one unlimited queue per project).

Beside the times: the API server's requests and webhook calls per run (from its metrics), the
watch events the runtime read per run, and the CPU per run of each component of the cluster
(Kueue's included): on a small machine the API server's share is what bounds admission.

Run from the repository root, under the machine's benchmark lock:
    flock /tmp/runplane-bench.lock python bench/kueue_admission.py             # 2000 runs
    flock /tmp/runplane-bench.lock python bench/kueue_admission.py --runs 400 --nodes 40
    # in two shorter commands (2,000 runs on 200 nodes take ~5 and ~8 minutes on 2 cores):
    # one side each, the second reading the first's numbers
    flock /tmp/runplane-bench.lock python bench/kueue_admission.py --only without --json a.json
    flock /tmp/runplane-bench.lock python bench/kueue_admission.py --only with --against a.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kubernetes import client
from kubernetes.client.exceptions import ApiException

import runplane
from runplane import names
from runplane.bootstrap import Invocation
from runplane.config import Settings
from runplane.rendering import RunRef, render
from runplane.runs import RunState
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.kubernetes import KubernetesRuntime
from runplane.runtimes.kubernetes.api.rest import RestApi
from testbed import cluster, kube, topology
from testbed import kueue as tb_kueue


def _request(settings: Settings, project: str, index: int) -> RunRequest:
    fn = runplane.new_function(f"b{index % 10}", project=project, image="registry.example/b:1")
    fn.with_requests(cpu="100m", mem="64Mi").with_preemption_mode("allow")
    uid = uuid.uuid4().hex
    out = render(fn, settings, run=RunRef(uid, 1))
    invocation = Invocation(
        uid=uid,
        attempt=1,
        project=project,
        function=fn.metadata.name,
        handler="h",
        code="",
        filename="b.py",
    )
    return RunRequest(invocation, out.manifests, out.resources, submitted=time.time())


def _cpu_s(pid: int) -> float:
    """A process's user and system CPU seconds so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_REQUESTS = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$", re.M)
_WEBHOOKS = re.compile(
    r"^apiserver_admission_webhook_admission_duration_seconds_count\{([^}]*)\} (\S+)$", re.M
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _api_counts(api: client.ApiClient) -> Counter[str]:
    """The API server's requests so far, by verb, resource and subresource (and its webhook
    calls, by webhook), from its metrics."""
    text = RestApi(api).send("GET", "/metrics").read().decode()
    counts: Counter[str] = Counter()
    for found in _REQUESTS.finditer(text):
        labels = dict(_LABEL.findall(found.group(1)))
        if labels.get("verb") in ("WATCH", "CONNECT"):
            continue
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        counts[f"{labels.get('verb')} {labels.get('resource')}{sub}"] += int(float(found.group(2)))
    for found in _WEBHOOKS.finditer(text):
        labels = dict(_LABEL.findall(found.group(1)))
        counts[f"webhook {labels.get('name')} {labels.get('operation')}"] += int(
            float(found.group(2))
        )
    return counts


def _components(running: cluster.Cluster, extra: list[cluster.Process]) -> dict[str, int]:
    return {p.name: p.pid for p in [*running.processes, *extra]}


def phase(
    api: client.ApiClient,
    runs: int,
    projects: int,
    kueue: str,
    components: dict[str, int],
    cleanup: bool = True,
) -> dict[str, Any]:
    """Launch ``runs`` runs and wait until every one is running; then (``cleanup``) delete
    their pods."""
    settings = Settings(namespace=topology.RUNS_NAMESPACE, kueue=kueue)  # type: ignore[arg-type]
    instance = f"bench-{uuid.uuid4().hex[:6]}"
    requests = [_request(settings, f"bench-{i % projects}", i) for i in range(runs)]
    running: set[str] = set()
    done = threading.Event()
    rt = KubernetesRuntime(settings, api=api, instance=instance, grace_period_seconds=0)
    assert (rt.kueue is not None) == (kueue == "on")

    async def consume() -> None:
        async for event in rt.events():
            if event.state is RunState.RUNNING:
                running.add(event.uid)
                if len(running) >= runs:
                    done.set()

    reader = threading.Thread(target=lambda: asyncio.run(consume()), daemon=True)
    reader.start()
    assert rt.watch.wait_synced(60)
    pod_events0 = rt.watch.stats.events
    workload_events0 = rt.kueue.watch.stats.events if rt.kueue else 0
    requests0 = _api_counts(api)
    others0 = {name: _cpu_s(pid) for name, pid in components.items()}
    cpu0, began = time.process_time(), time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(rt.launch, requests))
    launched = time.monotonic() - began
    finished = done.wait(1800)
    took = time.monotonic() - began
    cpu = time.process_time() - cpu0
    others = {name: _cpu_s(pid) - others0[name] for name, pid in components.items()}
    api_requests = _api_counts(api)
    api_requests.subtract(requests0)
    pod_events = rt.watch.stats.events - pod_events0
    workload_events = (rt.kueue.watch.stats.events if rt.kueue else 0) - workload_events0
    result = {
        "kueue": kueue,
        "runs": runs,
        "all_running": finished,
        "launch_s": round(launched, 1),
        "all_running_s": round(took, 1),
        "runs_per_s": round(len(running) / took, 1),
        "runtime_cpu_ms_per_run": round(cpu / runs * 1000, 2),
        "pod_watch_events_per_run": round(pod_events / runs, 1),
        "workload_watch_events_per_run": round(workload_events / runs, 1),
        "api_requests_per_run": {
            what: round(count / runs, 2)
            for what, count in sorted(api_requests.items(), key=lambda kv: -kv[1])
            if count >= runs / 10
        },
        "component_cpu_ms_per_run": {
            name: round(seconds / runs * 1000, 1) for name, seconds in others.items()
        },
    }
    print(json.dumps(result), file=sys.stderr, flush=True)  # kept should the cleanup fail
    rt.close()
    if cleanup:
        _delete_pods(api, instance)
    return result


def _delete_pods(api: client.ApiClient, instance: str) -> None:
    """The phase's pods, gone before this returns (Kueue lifts its finalizers as they go)."""
    core = client.CoreV1Api(api)
    selector = f"{names.INSTANCE}={instance}"
    while core.list_namespaced_pod(topology.RUNS_NAMESPACE, label_selector=selector, limit=1).items:
        with contextlib.suppress(ApiException):  # thousands at once may outlast one request
            core.delete_collection_namespaced_pod(
                topology.RUNS_NAMESPACE, label_selector=selector, _request_timeout=120
            )
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--projects", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=200, help="kwok nodes, half spot")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--only",
        choices=("without", "with"),
        help="measure one side (on a fresh cluster), e.g. to keep each command short",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="a --json of the other side, measured on this machine: its numbers and the ratios",
    )
    args = parser.parse_args()
    os.environ["RUNPLANE_CONFIG"] = os.devnull  # defaults only
    settings = cluster.Settings(verbosity=0, die_with_parent=True)
    with cluster.running(settings) as running:
        api = kube.api_client(running.kubeconfig, pool=32)
        half = args.nodes // 2
        topology.seed(api, topology.node_groups(1, half, args.nodes - half, 0))
        sides: dict[str, Any] = {}
        if args.only != "with":
            components = _components(running, [])
            sides["without_kueue"] = phase(
                api, args.runs, args.projects, "off", components, cleanup=args.only is None
            )
        if args.only != "without":
            started = tb_kueue.start(running)
            try:
                components = _components(running, [started.process])
                # the last side: the cluster goes with its pods
                sides["with_kueue"] = phase(
                    api, args.runs, args.projects, "on", components, cleanup=False
                )
            finally:
                started.stop()
    if args.against:
        other = json.loads(args.against.read_text())
        sides = {**{k: v for k, v in other.items() if k.endswith("_kueue")}, **sides}
    results: dict[str, Any] = {
        "command": "python bench/kueue_admission.py " + shlex.join(sys.argv[1:]),
        "nodes": args.nodes,
        "projects": args.projects,
        **sides,
    }
    if "without_kueue" in sides and "with_kueue" in sides:
        without, with_kueue = sides["without_kueue"], sides["with_kueue"]
        results["cpu_per_run_ratio"] = round(
            with_kueue["runtime_cpu_ms_per_run"] / without["runtime_cpu_ms_per_run"], 2
        )
        results["throughput_ratio"] = round(with_kueue["runs_per_s"] / without["runs_per_s"], 2)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

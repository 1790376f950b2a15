"""Chaos: runs with retries on a kwok cluster while spot nodes are deleted under them.

N jobs (half in preemption mode ``constrain``, half ``allow``, all with retries on
``preempted`` and ``node_lost``) run on a node group of their own. A loop deletes a random
spot node that holds a running attempt every few seconds, and the group "autoscales back": a
new spot node joins a moment later. The benchmark then checks what a user relies on:

* every run completes (all are recoverable: their retries outnumber the kills they can meet);
* nothing is duplicated: one pod per attempt, never two attempts of a run running at once on
  live nodes;
* attempts add up: each run's failed attempts are exactly its pods that were on deleted nodes,
  each classed ``node_lost`` (or ``preempted``), and the next attempt follows each;

and measures, from a pod watch of its own, how long each lost attempt took to be replaced:
node deleted -> the next attempt's pod Running (p50, p99, max).

Run from the repository root (it starts its own testbed cluster):
    python bench/chaos.py                         # 100 runs of 20 s, a kill every 2 s
    python bench/chaos.py --runs 20 --run-seconds 8 --kill-every 1.5 --kills 8   # short form
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client
from kubernetes.client.exceptions import ApiException

import runplane
from runplane import names
from runplane.config import load_settings
from runplane.runtimes.kubernetes.api.rest import RestApi
from runplane.runtimes.kubernetes.api.watch import DELETED, VANISHED, PodWatch
from runplane.service.server import Server
from testbed import topology

SPOT_GROUP = "chaos-spot"
ON_DEMAND_GROUP = "chaos-on-demand"
CODE = "def handler(context):\n    return {'ok': True}\n"


@dataclass
class Report:
    runs: int
    completed: int
    not_completed: dict[str, str]
    kills: int
    lost_attempts: int
    retries: int
    failed_attempt_classes: dict[str, int]
    #: One message per class, to see what the runs were told.
    examples: dict[str, str]
    fell_back_to_on_demand: int
    duplicates: list[str]
    mismatches: list[str]
    replacement_s: dict[str, float]
    wall_s: float
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.completed == self.runs
            and not self.duplicates
            and not self.mismatches
            and self.retries == self.lost_attempts
        )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


class PodLog:
    """What the bench itself sees of the runs' pods: when each was first Running, on which
    node, and whether two attempts of a run ever ran at once on live nodes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running_at: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.run_of: dict[str, tuple[str, int]] = {}
        self.live: dict[str, set[str]] = defaultdict(set)
        self.deleted_nodes: dict[str, float] = {}
        self.succeeded: set[str] = set()
        self.duplicates: list[str] = []

    def observe(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        name, uid = meta.get("name", ""), labels.get(names.RUN_UID, "")
        if not uid:
            return
        now = time.monotonic()
        phase = (pod.get("status") or {}).get("phase")
        node = (pod.get("spec") or {}).get("nodeName") or ""
        with self.lock:
            self.run_of[name] = (uid, int(labels.get(names.ATTEMPT, "1")))
            if node:
                self.node_of[name] = node
            if phase == "Succeeded":
                self.succeeded.add(name)
            gone = kind in (DELETED, VANISHED) or phase in ("Succeeded", "Failed")
            if gone or meta.get("deletionTimestamp"):
                self.live[uid].discard(name)
                return
            if phase == "Running" and name not in self.running_at:
                self.running_at[name] = now
                others = {
                    other
                    for other in self.live[uid]
                    if self.node_of.get(other) not in self.deleted_nodes
                }
                if others:
                    self.duplicates.append(f"{name} running while {sorted(others)} ran")
                self.live[uid].add(name)


def spot_group(count: int) -> topology.NodeGroup:
    return topology.NodeGroup(
        SPOT_GROUP,
        count,
        8,
        32,
        "m5.2xlarge",
        {topology.LIFECYCLE_LABEL: topology.SPOT},
        (topology.SPOT_TAINT,),
    )


def on_demand_group(count: int) -> topology.NodeGroup:
    return topology.NodeGroup(
        ON_DEMAND_GROUP, count, 8, 32, "m5.2xlarge", {topology.LIFECYCLE_LABEL: topology.ON_DEMAND}
    )


def chaos_function(code: Path, index: int, run_seconds: float, max_attempts: int) -> Any:
    fn = runplane.code_to_function(
        f"chaos-{index}", filename=str(code), handler="handler", image="registry.example/chaos:1"
    )
    fn.with_requests(cpu="100m", mem="64Mi")
    fn.spec.annotations = {"runplane.io/test-duration": f"{run_seconds:g}s"}
    fn.with_preemption_mode("constrain" if index % 2 == 0 else "allow")
    term = {
        "matchExpressions": [
            {"key": topology.GROUP_LABEL, "operator": "In", "values": [SPOT_GROUP, ON_DEMAND_GROUP]}
        ]
    }
    fn.with_node_selection(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    )
    return fn.with_retries(max_attempts, on=("preempted", "node_lost"), backoff=0)


def run_chaos(
    api: client.ApiClient,
    kubeconfig: Path,
    *,
    runs: int = 100,
    run_seconds: float = 20.0,
    spot_nodes: int = 6,
    on_demand_nodes: int = 3,
    kill_every: float = 2.0,
    kills: int = 30,
    come_back_after: float = 1.0,
    max_attempts: int = 20,
    timeout: float = 600.0,
    workdir: Path | None = None,
    seed: int | None = None,
) -> Report:
    """The chaos run on the cluster ``api`` reaches; leaves its nodes deleted afterwards."""
    chooser = random.Random(seed)
    workdir = workdir or Path(tempfile.mkdtemp(prefix="runplane-chaos-"))
    core = client.CoreV1Api(api)
    tag = uuid.uuid4().hex[:6]
    spot, on_demand = spot_group(spot_nodes), on_demand_group(on_demand_nodes)
    generation = iter(range(1_000_000))

    def spot_node() -> str:
        name = f"chaos-{tag}-spot-{next(generation)}"
        topology.create_nodes(api, [topology.node_manifest(spot, name)])
        return name

    created = [spot_node() for _ in range(spot_nodes)]
    created += topology.create_nodes(
        api,
        [
            topology.node_manifest(on_demand, f"chaos-{tag}-od-{i}", i)
            for i in range(on_demand_nodes)
        ],
    )
    topology.wait_nodes_ready(api, created, timeout=120)
    instance = f"chaos-{tag}"
    settings = load_settings(
        namespace=topology.RUNS_NAMESPACE,
        local={"home": str(workdir / "home")},
        service={
            "runtime": "kubernetes",
            "kubeconfig": str(kubeconfig),
            "instance": instance,
            "database_url": f"sqlite:///{workdir / 'chaos.db'}",
        },
    )
    server = Server(settings)
    pods = PodLog()
    watch = PodWatch(
        RestApi(api),
        topology.RUNS_NAMESPACE,
        f"{names.RUN_UID},{names.INSTANCE}={instance}",
        pods.observe,
        name="chaos-pod-watch",
    ).start()
    live_spot = list(created[:spot_nodes])
    stop = threading.Event()
    killed: list[str] = []

    def kill_loop() -> None:
        while not stop.wait(kill_every) and len(killed) < kills:
            with pods.lock:
                busy = {pods.node_of.get(name) for names_ in pods.live.values() for name in names_}
            targets = [node for node in live_spot if node in busy] or list(live_spot)
            if not targets:
                continue
            node = chooser.choice(targets)
            live_spot.remove(node)
            with pods.lock:
                pods.deleted_nodes[node] = time.monotonic()
            core.delete_node(node)
            killed.append(node)
            if not stop.wait(come_back_after):  # the group autoscales back
                replacement = spot_node()
                topology.wait_nodes_ready(api, [replacement], timeout=60)
                live_spot.append(replacement)
                created.append(replacement)

    began = time.monotonic()
    code = workdir / "chaos_job.py"
    code.write_text(CODE)
    uids = [
        server.runs.submit(chaos_function(code, i, run_seconds, max_attempts), owner="chaos").uid
        for i in range(runs)
    ]
    killer = threading.Thread(target=kill_loop, name="chaos-kills", daemon=True)
    killer.start()
    try:
        deadline = time.monotonic() + timeout
        records = {}
        for uid in uids:
            records[uid] = server.runs.wait(uid, timeout=max(deadline - time.monotonic(), 1))
        wall = time.monotonic() - began
    finally:
        stop.set()
        killer.join(30)
        watch.stop()
        server.close()
        for node in created:
            with contextlib.suppress(ApiException):  # killed already
                core.delete_node(node)
    shape = {
        "runs": runs,
        "run_seconds": run_seconds,
        "spot_nodes": spot_nodes,
        "on_demand_nodes": on_demand_nodes,
        "kill_every": kill_every,
        "kills": kills,
        "come_back_after": come_back_after,
    }
    return analyse(records, pods, killed, wall, shape)


def analyse(
    records: dict[str, Any], pods: PodLog, killed: list[str], wall: float, settings: dict[str, Any]
) -> Report:
    classes: dict[str, int] = defaultdict(int)
    examples: dict[str, str] = {}
    mismatches: list[str] = []
    lost_attempts = 0
    latencies: list[float] = []
    by_run: dict[str, dict[int, str]] = defaultdict(dict)
    with pods.lock:
        for name, (uid, attempt) in pods.run_of.items():
            if attempt in by_run[uid]:
                mismatches.append(f"run {uid} attempt {attempt} had two pods")
            by_run[uid][attempt] = name
        for uid, record in records.items():
            attempts = by_run[uid]
            if sorted(attempts) != list(range(1, len(record.attempts) + 1)):
                mismatches.append(
                    f"run {uid}: pods of attempts {sorted(attempts)}, "
                    f"records of {len(record.attempts)}"
                )
            lost_here = []
            for number, name in sorted(attempts.items()):
                node = pods.node_of.get(name, "")
                if node not in pods.deleted_nodes or name in pods.succeeded:
                    continue
                lost_here.append(number)  # bound to a node that went, and never finished
                started, later = pods.running_at.get(name), attempts.get(number + 1)
                was_running = started is not None and started < pods.deleted_nodes[node]
                if was_running and later in pods.running_at:
                    latencies.append(pods.running_at[later] - pods.deleted_nodes[node])
            lost_attempts += len(lost_here)
            failed = [a.number for a in record.attempts[:-1]]
            if lost_here != failed:
                mismatches.append(
                    f"run {uid}: attempts lost with their node {lost_here}, failed attempts "
                    f"{failed}: "
                    + "; ".join(
                        f"{a.number} {a.failure or a.reason} on {a.node} "
                        f"(deleted: {a.node in pods.deleted_nodes}, "
                        f"seen succeeded: {attempts.get(a.number) in pods.succeeded})"
                        for a in record.attempts
                    )
                )
            for attempt in record.attempts[:-1]:
                classes[attempt.failure] += 1
                examples.setdefault(attempt.failure, f"{attempt.reason}: {attempt.message}")
                if attempt.failure not in ("node_lost", "preempted"):
                    mismatches.append(f"run {uid} attempt {attempt.number}: {attempt.failure}")
    retries = sum(len(record.attempts) - 1 for record in records.values())
    fell_back = sum(
        1
        for record in records.values()
        if record.attempts[-1].preemption_mode == "prevent"
        and record.attempts[0].preemption_mode != "prevent"
    )
    replacement = (
        {
            "n": len(latencies),
            "p50": round(statistics.median(latencies), 2),
            "p99": round(percentile(latencies, 0.99), 2),
            "max": round(max(latencies), 2),
        }
        if latencies
        else {"n": 0}
    )
    return Report(
        runs=len(records),
        completed=sum(1 for r in records.values() if r.state == "completed"),
        not_completed={
            uid: f"{r.state} {r.reason}: {r.status_text}"
            for uid, r in records.items()
            if r.state != "completed"
        },
        kills=len(killed),
        lost_attempts=lost_attempts,
        retries=retries,
        failed_attempt_classes=dict(classes),
        examples=examples,
        fell_back_to_on_demand=fell_back,
        duplicates=list(pods.duplicates),
        mismatches=mismatches,
        replacement_s=replacement,
        wall_s=round(wall, 1),
        settings=settings,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--run-seconds", type=float, default=20.0)
    parser.add_argument("--spot-nodes", type=int, default=6)
    parser.add_argument("--on-demand-nodes", type=int, default=3)
    parser.add_argument("--kill-every", type=float, default=2.0)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()

    from testbed import cluster, kube

    running = cluster.start(allow_build=False)
    try:
        api = kube.api_client(running.kubeconfig)
        topology.seed(api, topology.node_groups(system=1, on_demand=0, spot=0, gpu=0))
        report = run_chaos(
            api,
            running.kubeconfig,
            runs=args.runs,
            run_seconds=args.run_seconds,
            spot_nodes=args.spot_nodes,
            on_demand_nodes=args.on_demand_nodes,
            kill_every=args.kill_every,
            kills=args.kills,
            seed=args.seed,
        )
    finally:
        running.stop()
    result = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        **asdict(report),
        "ok": report.ok,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

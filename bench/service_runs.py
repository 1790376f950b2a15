"""The service under load: runs submitted through the HTTP API to a kwok cluster.

Starts the testbed (real apiserver, scheduler, controller-manager; kwok nodes), a bench node
group, and ``runplane serve`` on the Kubernetes runtime as a separate process, then:

* submits ``--runs`` runs through the API from ``--clients`` threads: submissions per second;
* API accept -> pod Running, p50/p99, from the run records (Kubernetes reports container start
  times in whole seconds, so these are accurate to about a second);
* threshold-breach detection: ``--breaches`` runs that can never be scheduled, with a 2 s
  ``pending_not_scheduled`` threshold: how long after the deadline each was aborted (p99);
* the service's resident memory at the end;
* with ``--profile``, where its CPU went: per thread (the system's count of each thread's
  CPU time, named by py-spy's samples), and py-spy's samples of the thread holding the GIL.

    python bench/service_runs.py [--nodes 200] [--runs 2000] [--clients 8] [--breaches 100]
                                 [--run-seconds 3600] [--restart] [--profile FILE]
                                 [--database postgresql+psycopg://USER@HOST:PORT/DB]

With ``--database``, the service records runs in a database of its own created on that
PostgreSQL server (dropped after) instead of SQLite, and the server's CPU per run is reported
beside the service's: the database's work is then a process of its own, as the control plane's
is.

``measure`` runs the same on a cluster already up (CI's short form:
``tests/integration/test_service_bench.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import psutil
from kubernetes import client

from testbed import cluster, kube, meters, serve, topology

if TYPE_CHECKING:
    from sqlalchemy import Engine

TOKEN = "bench-token-0123456789"
CODE = "def handler(context):\n    return 1\n"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


@dataclass(frozen=True)
class Load:
    """What the benchmark submits, and to how many nodes."""

    nodes: int = 200
    runs: int = 2000
    clients: int = 8
    breaches: int = 100
    #: How long each run's pod runs (kwok); shorter than the benchmark, every run must end too.
    run_seconds: int = 3600
    restart: bool = False
    profile: Path | None = None
    #: A PostgreSQL server's URL (its maintenance database), where the benchmark's database is
    #: made; ``None``: SQLite, a file of the service's.
    database: str | None = None


class Bench:
    """One benchmark's service, its nodes and its records, on a cluster that is up."""

    def __init__(
        self, work: Path, kubeconfig: Path, namespace: str, tag: str, database: str | None = None
    ) -> None:
        self.work, self.kubeconfig, self.namespace, self.tag = work, kubeconfig, namespace, tag
        self.group = f"bench-{tag}"
        self.database_url = f"sqlite:///{work / 'service.db'}"
        self._server: str | None = database
        self._engine: Engine | None = None
        if database is not None:
            self.database_url = created_database(database, f"runplane_bench_{tag}")

    def function(self, name: str, annotations: dict[str, str], cpu: str) -> dict[str, Any]:
        import runplane

        path = self.work / f"{name}.py"
        path.write_text(CODE)
        fn = runplane.code_to_function(
            name, filename=str(path), handler="handler", image="registry.example/bench:1"
        )
        fn.with_requests(cpu=cpu, mem="16Mi").with_node_selection(
            node_selector={topology.GROUP_LABEL: self.group}
        )
        fn.spec.annotations = annotations
        return fn.to_dict()

    def start_service(self) -> tuple[subprocess.Popen[bytes], str]:
        work = self.work
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")} | {
            "RUNPLANE_CONFIG": os.devnull,
            "RUNPLANE_LOCAL__HOME": str(work / "home"),
            "RUNPLANE_NAMESPACE": self.namespace,
            "RUNPLANE_SERVICE__RUNTIME": "kubernetes",
            "RUNPLANE_SERVICE__KUBECONFIG": str(self.kubeconfig),
            "RUNPLANE_SERVICE__INSTANCE": self.group,
            "RUNPLANE_SERVICE__DATABASE_URL": self.database_url,
            "RUNPLANE_SERVICE__TOKENS": json.dumps(
                [{"token": TOKEN, "user": "bench", "role": "admin"}]
            ),
        }
        # A start re-lists every pod and re-arms every live run: minutes at 10,000 on a busy
        # machine are a finding to report, not a failure to start.
        return serve.start_service(env, work / "service.log", timeout=900)

    def states(self) -> dict[str, tuple[str, bool]]:
        """Each run's state and whether it has started, by uid: the light query the waits
        poll (loading every record each time would be this process's largest cost)."""
        if self._server is not None:
            if self._engine is None:  # one connection for the benchmark: a poll opens none
                from sqlalchemy import create_engine

                self._engine = create_engine(self.database_url, pool_size=1)
            with self._engine.connect() as connection:
                rows = connection.exec_driver_sql("SELECT uid, state, started_at FROM runs")
                return {uid: (state, started is not None) for uid, state, started in rows}
        database = f"file:{self.work / 'service.db'}?mode=ro"
        with sqlite3.connect(database, uri=True, timeout=30) as connection:
            rows = connection.execute("SELECT uid, state, started_at FROM runs")
            return {uid: (state, started is not None) for uid, state, started in rows}

    def records(self) -> list[Any]:
        """Every run as recorded, read by this process (asking the service would add to
        what it is measured doing)."""
        from runplane.service.db import connect
        from runplane.service.records import RunStore

        store = RunStore(connect(self.database_url))
        try:
            return store.list_runs(limit=1_000_000)
        finally:
            store.close()

    def drop_database(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        if self._server is not None:
            dropped_database(self._server, self.database_url)


def created_database(server: str, name: str) -> str:
    """The URL of a new, empty database ``name`` on the PostgreSQL server ``server`` names."""
    from sqlalchemy import make_url

    _on_server(server, f'CREATE DATABASE "{name}"')
    return make_url(server).set(database=name).render_as_string(hide_password=False)


def dropped_database(server: str, url: str) -> None:
    from sqlalchemy import make_url

    _on_server(server, f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


def _on_server(server: str, statement: str) -> None:
    """``statement`` run on the server outside a transaction (as databases are made)."""
    from sqlalchemy import create_engine

    engine = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


def database_processes(server: str | None) -> list[psutil.Process]:
    """The PostgreSQL server's processes (the postmaster and its backends), by the port its
    URL names: what the database does for the service is counted apart from the service."""
    if server is None:
        return []
    from sqlalchemy import make_url

    port = make_url(server).port or 5432
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "postgres" and f"-p {port}" in " ".join(
            process.info["cmdline"] or []
        ):
            found.append(process)
    return [*found, *(c for p in found for c in p.children(recursive=True))]


def started(record: Any) -> float:
    """When the service saw the run Running (pod times have whole-second resolution)."""
    return float(next(t.at for t in record.transitions if t.state == "running"))


def restarted(
    bench: Bench, service: subprocess.Popen[bytes], submit: Any, clients: int
) -> tuple[subprocess.Popen[bytes], str, dict[str, Any]]:
    """Runs that end while the service is down or just after it is back: the service is
    stopped and started again; each run must have recorded each of its changes once."""
    short = bench.function("short", {"runplane.io/test-duration": "20s"}, "10m")
    with ThreadPoolExecutor(clients) as pool:
        ending = set(pool.map(submit, [{"function": short}] * 100))
    deadline = time.monotonic() + 900  # a cluster busy with thousands of runs starts pods late
    while sum(bench.states()[uid][0] == "running" for uid in ending) < len(ending):
        assert time.monotonic() < deadline, "the short runs did not start"
        time.sleep(0.5)
    before = {r.uid: [t.state for t in r.transitions] for r in bench.records()}
    began = time.monotonic()
    service.terminate()
    service.wait(timeout=60)
    stopped_s = time.monotonic() - began
    began = time.monotonic()
    service, base = bench.start_service()
    resumed_s = time.monotonic() - began  # answering: listed, watching, reconciled
    deadline = time.monotonic() + 600
    while sum(bench.states()[uid][0] == "completed" for uid in ending) < len(ending):
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    now = {r.uid: [t.state for t in r.transitions] for r in bench.records()}
    whole = ["created", "pending", "running", "completed"]
    wrong = [uid for uid in ending if now[uid] != whole]
    # Another run may have gone on (ended) meanwhile, but never lost or repeated a change.
    changed = [
        uid
        for uid in before
        if uid not in ending
        and (now[uid][: len(before[uid])] != before[uid] or len(set(now[uid])) != len(now[uid]))
    ]
    print(
        f"restart with {len(before)} runs recorded: stopped in {stopped_s:.1f} s, answering "
        f"again (re-listed, watching, reconciled) {resumed_s:.1f} s after it started; "
        f"{len(ending) - len(wrong)}/{len(ending)} runs that ended around the restart recorded "
        f"each change once; {len(changed)} other runs lost or repeated a change"
    )
    return (
        service,
        base,
        {
            "restart_s": round(resumed_s, 1),
            "restart_runs": len(before),
            "restart_wrong": len(wrong),
            "restart_changed": len(changed),
        },
    )


def thread_names(profile: Path) -> dict[int, str]:
    """The service's threads' names by their system id, as py-spy's raw samples give them
    (``thread (TID): NAME;frame;...``)."""
    names: dict[int, str] = {}
    for line in profile.read_text().splitlines():
        head = line.split(";", 1)[0]
        if head.startswith("thread (") and "): " in head:
            tid, name = head[len("thread (") :].split("): ", 1)
            names[int(tid)] = name
    return names


def per_thread(cpu: dict[int, float], names: dict[int, str]) -> Counter[str]:
    """CPU seconds by thread name (a pool's threads together; threads py-spy never saw
    holding the GIL as "other")."""
    spent: Counter[str] = Counter()
    for tid, seconds in cpu.items():
        spent[names.get(tid, "other").rstrip("0123456789").rstrip("- ")] += seconds
    return spent


def measure(
    api: Any,
    kubeconfig: Path,
    work: Path,
    load: Load,
    *,
    namespace: str = topology.RUNS_NAMESPACE,
    plane: Iterable[psutil.Process] = (),
) -> dict[str, Any]:
    """The benchmark on the cluster ``api`` reaches, on nodes of its own (deleted after);
    prints as it goes and returns the summary. ``plane``: the control plane's processes,
    whose share of the CPU is reported."""
    bench = Bench(work, kubeconfig, namespace, uuid.uuid4().hex[:6], load.database)
    group = topology.NodeGroup(bench.group, load.nodes, 32, 128, "m5.8xlarge", max_pods=250)
    nodes = group.node_names()
    topology.create_nodes(api, (topology.node_manifest(group, n, i) for i, n in enumerate(nodes)))
    service = None
    try:
        topology.wait_nodes_ready(api, nodes, timeout=300)
        service, base = bench.start_service()
        summary = _measure(bench, service, base, load, list(plane))
        service = summary.pop("service")
        return summary
    finally:
        if service is not None:
            service.terminate()
            service.wait(timeout=30)
        core = client.CoreV1Api(api)
        for node in nodes:
            core.delete_node(node)
        bench.drop_database()


def _measure(
    bench: Bench,
    service: subprocess.Popen[bytes],
    base: str,
    load: Load,
    plane: list[psutil.Process],
) -> dict[str, Any]:
    url = f"{base}/api/v1"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    steady = bench.function("steady", {"runplane.io/test-duration": f"{load.run_seconds}s"}, "10m")
    connections = threading.local()

    def submit(body: dict[str, Any]) -> str:
        # One keep-alive connection per client thread, as a real client pool would have.
        if not hasattr(connections, "http"):
            connections.http = httpx.Client(base_url=url, headers=headers, timeout=60)
        answer = connections.http.post("/runs", json=body)
        answer.raise_for_status()
        return str(answer.json()["uid"])

    served = psutil.Process(service.pid)
    rss_idle = served.memory_info().rss
    profiler = None
    if load.profile:
        profiler = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("py-spy")),  # installed beside python
                *("record", "--pid", str(service.pid), "--threads", "--gil"),
                *("--rate", "100", "--nonblocking"),
                *("--format", "raw", "--output", str(load.profile)),
            ],
            stdout=subprocess.DEVNULL,
        )
    counted_before = meters.scrape(base, TOKEN)
    threads_before = {t.id: t.user_time + t.system_time for t in served.threads()}
    cpu_before = sum(served.cpu_times()[:2])
    system_before = served.cpu_times().system
    plane_before = {p.pid: sum(p.cpu_times()[:2]) for p in plane}
    machine_before = sum(psutil.cpu_times()[:3])
    database = {p.pid: p for p in database_processes(load.database)}
    database_before = {pid: _cpu(p) for pid, p in database.items()}
    start = time.monotonic()
    with ThreadPoolExecutor(load.clients) as pool:
        uids = list(pool.map(submit, [{"function": steady}] * load.runs))
    submit_s = time.monotonic() - start
    submitted = set(uids)
    service_cpu = sum(served.cpu_times()[:2]) - cpu_before
    threads_cpu = {
        t.id: t.user_time + t.system_time - threads_before.get(t.id, 0.0) for t in served.threads()
    }
    service_system = served.cpu_times().system - system_before
    plane_cpu = sum(sum(p.cpu_times()[:2]) - plane_before[p.pid] for p in plane)
    machine_cpu = sum(psutil.cpu_times()[:3]) - machine_before
    database |= {p.pid: p for p in database_processes(load.database)}  # backends opened since
    database_cpu = sum(
        max(0.0, _cpu(p) - database_before.get(pid, 0.0)) for pid, p in database.items()
    )
    print(
        f"submitted {len(uids)} runs in {submit_s:.1f} s: "
        f"{len(uids) / submit_s:.1f} runs/s from {load.clients} clients"
    )
    print(
        f"service CPU while submitting: {service_cpu:.1f} s, "
        f"{service_cpu / len(uids) * 1000:.1f} ms per run ({service_system / service_cpu:.0%} "
        f"in the kernel) -> one core of the service alone would accept "
        f"{len(uids) / service_cpu:.0f} runs/s"
    )
    if load.database is not None:
        print(
            f"PostgreSQL's CPU while submitting: {database_cpu:.1f} s, "
            f"{database_cpu / len(uids) * 1000:.1f} ms per run, "
            f"{database_cpu / machine_cpu:.0%} of the machine's"
        )
    print(
        f"CPU while submitting, of {machine_cpu:.1f} s used on the machine: service "
        f"{service_cpu / machine_cpu:.0%}, control plane and kwok {plane_cpu / machine_cpu:.0%}"
        f" ({plane_cpu / len(uids) * 1000:.1f} ms per pod), everything else "
        f"{1 - (service_cpu + plane_cpu) / machine_cpu:.0%}"
    )
    deadline = time.monotonic() + 900
    while True:
        states = bench.states()
        if sum(states[uid][1] for uid in submitted) >= load.runs or time.monotonic() > deadline:
            break
        time.sleep(2)
    done = [r for r in bench.records() if r.started_at is not None and r.uid in submitted]
    all_running_s = time.monotonic() - start
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(timeout=60)
    if profiler is not None and load.profile:
        by_thread = per_thread(threads_cpu, thread_names(load.profile))
        print("service CPU while submitting, by thread (ms per run):")
        for name, seconds in by_thread.most_common():
            print(f"  {name}: {seconds / len(uids) * 1000:.2f}")
    latencies = [started(r) - r.created_at for r in done]
    print(
        f"{len(done)}/{load.runs} reached Running {all_running_s:.1f} s after the first "
        f"submit; accept -> Running p50 {statistics.median(latencies):.2f} s, "
        f"p99 {percentile(latencies, 0.99):.2f} s"
    )
    rss_live = served.memory_info().rss
    live_kib = (rss_live - rss_idle) / max(len(done), 1) / 1024
    print(
        f"service resident memory with {len(done)} live runs: {rss_live / 2**20:.0f} MiB, "
        f"{live_kib:.1f} KiB per live run over {rss_idle / 2**20:.0f} MiB at the start"
    )
    restart: dict[str, Any] = {}
    if load.restart:
        service, base, restart = restarted(bench, service, submit, load.clients)
        url = f"{base}/api/v1"
        counted_before = Counter()  # the new service counts from zero
    stuck = bench.function("stuck", {}, "1000")
    threshold = 2.0
    body = {"function": stuck, "state_thresholds": {"pending_not_scheduled": "2s"}}
    with ThreadPoolExecutor(load.clients) as pool:
        breach_uids = set(pool.map(submit, [body] * load.breaches))
    deadline = time.monotonic() + 120
    while True:
        states = bench.states()
        stopped_now = sum(states[uid][0] == "aborted" for uid in breach_uids)
        if stopped_now >= load.breaches or time.monotonic() > deadline:
            break
        time.sleep(1)
    aborted = [r for r in bench.records() if r.uid in breach_uids and r.state == "aborted"]
    lags = []
    for record in aborted:
        pending = next(t.at for t in record.transitions if t.state == "pending")
        stopped = next(t.at for t in record.transitions if t.state in ("aborting", "aborted"))
        lags.append(stopped - (pending + threshold))
    if lags:
        print(
            f"{len(aborted)}/{load.breaches} aborted by their threshold; detection after the "
            f"deadline p50 {statistics.median(lags):.2f} s, p99 {percentile(lags, 0.99):.2f} s"
        )
    completed: int | None = None
    if load.run_seconds < 3600:
        deadline = time.monotonic() + load.run_seconds + 900
        while True:
            states = bench.states()
            completed = sum(states[uid][0] == "completed" for uid in submitted)
            if completed >= load.runs or time.monotonic() > deadline:
                break
            time.sleep(5)
        print(f"{completed}/{load.runs} completed")
    rss = psutil.Process(service.pid).memory_info().rss
    print(f"service resident memory: {rss / 2**20:.0f} MiB")
    # Counted over the whole benchmark (since the restart, with --restart): the runs, their
    # breaches, nothing else.
    spent = meters.per_run(counted_before, meters.scrape(base, TOKEN), load.runs + load.breaches)
    print("per run (of all submitted), what the service counted:")
    for key, value in spent.items():
        print(f"  {key}: {value}")
    return {
        "service": service,
        "nodes": load.nodes,
        "runs": load.runs,
        "clients": load.clients,
        "submit_per_s": round(len(uids) / submit_s, 1),
        "service_cpu_ms_per_run": round(service_cpu / len(uids) * 1000, 1),
        "service_cpu_share": round(service_cpu / machine_cpu, 2),
        "control_plane_cpu_share": round(plane_cpu / machine_cpu, 2),
        **(
            {
                "database_cpu_ms_per_run": round(database_cpu / len(uids) * 1000, 1),
                "database_cpu_share": round(database_cpu / machine_cpu, 2),
            }
            if load.database is not None
            else {}
        ),
        "reached_running": len(done),
        "running_p50_s": round(statistics.median(latencies), 2),
        "running_p99_s": round(percentile(latencies, 0.99), 2),
        "aborted": len(aborted),
        "breach_p99_s": round(percentile(lags, 0.99), 2) if lags else None,
        "completed": completed,
        "service_rss_mib": round(rss / 2**20),
        "live_run_kib": round(live_kib, 1),
        **restart,
        "per_run": spent,
    }


def _cpu(process: psutil.Process) -> float:
    """A process's CPU seconds so far; what it spent before it ended is not known here."""
    try:
        return float(sum(process.cpu_times()[:2]))
    except psutil.NoSuchProcess:
        return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=Load.nodes)
    parser.add_argument("--runs", type=int, default=Load.runs)
    parser.add_argument("--clients", type=int, default=Load.clients)
    parser.add_argument("--breaches", type=int, default=Load.breaches)
    parser.add_argument(
        "--run-seconds",
        type=int,
        default=Load.run_seconds,
        help="how long each run's pod runs (kwok); shorter than the benchmark, every run must "
        "also end, and it waits for that",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="once every run is Running, start runs of 20 s, stop the service (SIGTERM) and "
        "start another: how long it takes to re-list and resume, and whether every event "
        "was recorded once",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="sample the service with py-spy (the thread holding the GIL, named) until every "
        "run is Running; writes collapsed stacks to this file, and prints the service's CPU "
        "per run by thread while the runs were submitted",
    )
    parser.add_argument(
        "--database",
        help="a PostgreSQL server's URL (postgresql+psycopg://USER@HOST:PORT/postgres): the "
        "service records runs in a database made there for the benchmark (dropped after), "
        "and the server's CPU per run is reported beside the service's; default: SQLite",
    )
    args = parser.parse_args()
    print(f"command: {shlex.join([Path(sys.executable).name, *sys.argv])}")
    work = Path(tempfile.mkdtemp(prefix="runplane-service-bench-"))
    # Thousands of kwok nodes on two busy cores may miss heartbeats: a grace of minutes keeps
    # the node controller from evicting runs of nodes it would otherwise call unreachable.
    settings = cluster.Settings(terminated_pod_gc_threshold=12500, node_monitor_grace="5m")
    running = cluster.start(settings=settings, allow_build=False)
    try:
        api = kube.api_client(running.kubeconfig)
        topology.seed(api, topology.node_groups())
        load = Load(**{k.replace("-", "_"): v for k, v in vars(args).items()})
        plane = [psutil.Process(p.pid) for p in running.processes]
        summary = measure(api, running.kubeconfig, work, load, plane=plane)
        summary.pop("per_run")
        print(json.dumps(summary))
    finally:
        running.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

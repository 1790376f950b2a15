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
                                 [--beside TREE]

With ``--beside TREE`` (another runplane source tree, such as a git worktree of an earlier
commit), that tree's service runs beside this one's, each with ``--nodes`` nodes and
``--runs`` runs of its own, the clients submitting to each in turn: both are measured in the
same seconds, on a machine whose speed wanders between runs of one command by a fifth, and the
ratio of their CPU per run is printed.

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
import shutil
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
from functools import partial
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
    #: Another runplane source tree (its ``src/`` is imported), whose service runs beside this
    #: one, each on ``nodes`` nodes of its own, with the runs taken by each in turn.
    beside: Path | None = None
    #: py-spy's samples per second, with ``profile``.
    profile_rate: int = 100


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

    def start_service(self, tree: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
        """``runplane serve`` of this tree, or of the source tree ``tree``."""
        work = self.work
        source = {} if tree is None else {"PYTHONPATH": str(tree.resolve() / "src")}
        env = (
            {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
            | source
            | {
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
        )
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

    def count(self, uids: Iterable[str], state: str | None = None) -> int:
        """How many of ``uids`` are in ``state`` now (``None``: have started), in one read
        of the table (a read per run would take the control plane's CPU while it waits)."""
        now = self.states()
        return sum((now[uid][0] == state) if state else now[uid][1] for uid in uids)

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
    while bench.count(ending, "running") < len(ending):
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
    while bench.count(ending, "completed") < len(ending):
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
    whose share of the CPU is reported. With ``load.beside``, a second service (that source
    tree's) runs beside this one on as many nodes of its own, and the runs alternate between
    the two: each is measured in the very same seconds as the other."""
    trees: list[Path | None] = [None] if load.beside is None else [None, load.beside]
    benches = [
        Bench(work / f"service-{i}", kubeconfig, namespace, uuid.uuid4().hex[:6], load.database)
        for i, _ in enumerate(trees)
    ]
    groups = [
        topology.NodeGroup(bench.group, load.nodes, 32, 128, "m5.8xlarge", max_pods=250)
        for bench in benches
    ]
    nodes = [node for group in groups for node in group.node_names()]
    for group in groups:
        topology.create_nodes(
            api, (topology.node_manifest(group, n, i) for i, n in enumerate(group.node_names()))
        )
    served: list[Served] = []
    try:
        topology.wait_nodes_ready(api, nodes, timeout=300)
        for bench, tree in zip(benches, trees, strict=True):
            bench.work.mkdir(parents=True, exist_ok=True)
            served.append(Served(bench, *bench.start_service(tree), tree))
        summary = _measure(served, load, list(plane))
        return summary
    finally:
        for one in served:
            one.process.terminate()
            one.process.wait(timeout=30)
        core = client.CoreV1Api(api)
        for node in nodes:
            core.delete_node(node)
        for bench in benches:
            bench.drop_database()


@dataclass
class Served:
    """A service under measurement: its bench, its process and base URL, and the source
    tree it runs (``None``: this one)."""

    bench: Bench
    process: subprocess.Popen[bytes]
    base: str
    tree: Path | None

    @property
    def label(self) -> str:
        return "this tree" if self.tree is None else str(self.tree)

    def spent(self) -> Spent:
        """What the process has used so far."""
        process = psutil.Process(self.process.pid)
        times = process.cpu_times()
        return Spent(
            cpu=times.user + times.system,
            system=times.system,
            threads={t.id: t.user_time + t.system_time for t in process.threads()},
            switches=_switches(self.process.pid),
        )


@dataclass(frozen=True)
class Spent:
    """A process's CPU seconds (all, in the kernel, by thread) and its threads' context
    switches (voluntary, involuntary) so far."""

    cpu: float
    system: float
    threads: dict[int, float]
    switches: tuple[int, int]

    def since(self, before: Spent) -> Spent:
        return Spent(
            cpu=self.cpu - before.cpu,
            system=self.system - before.system,
            threads={t: c - before.threads.get(t, 0.0) for t, c in self.threads.items()},
            switches=(
                self.switches[0] - before.switches[0],
                self.switches[1] - before.switches[1],
            ),
        )


def _switches(pid: int) -> tuple[int, int]:
    """The context switches of every thread of ``pid`` so far (voluntary: it waited for
    something; involuntary: another took its core), from ``/proc``."""
    voluntary = involuntary = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as status:
                for line in status:
                    if line.startswith("voluntary_ctxt_switches:"):
                        voluntary += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        involuntary += int(line.split()[1])
        except OSError:  # the thread ended meanwhile
            continue
    return voluntary, involuntary


class Clients:
    """The benchmark's clients: threads submitting runs, each with one keep-alive connection
    to each service, as a real client pool would have."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._connections = threading.local()

    def submit(self, base: str, body: dict[str, Any]) -> str:
        connections = self._connections.__dict__.setdefault("by_base", {})
        http = connections.get(base)
        if http is None:
            http = connections[base] = httpx.Client(
                base_url=f"{base}/api/v1",
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=60,
            )
        answer = http.post("/runs", json=body)
        if answer.is_error:
            raise RuntimeError(f"{base} refused a run: {answer.status_code} {answer.text}")
        return str(answer.json()["uid"])

    def each(self, jobs: list[tuple[str, dict[str, Any]]]) -> list[str]:
        """Submit every (service base, body), ``count`` at a time, in order; their uids."""
        with ThreadPoolExecutor(self.count) as pool:
            return list(pool.map(lambda job: self.submit(*job), jobs))


def _alternating(served: list[Served], bodies: list[dict[str, Any]], runs: int) -> list[Any]:
    """``runs`` submissions, taking the services in turn (with each its own body)."""
    return [(served[i % len(served)].base, bodies[i % len(served)]) for i in range(runs)]


def _measure(served: list[Served], load: Load, plane: list[psutil.Process]) -> dict[str, Any]:
    clients = Clients(load.clients)
    duration = {"runplane.io/test-duration": f"{load.run_seconds}s"}
    steady = [{"function": one.bench.function("steady", duration, "10m")} for one in served]
    first = served[0]
    rss_idle = [psutil.Process(one.process.pid).memory_info().rss for one in served]
    profiler = None
    if load.profile:
        profiler = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("py-spy")),  # installed beside python
                *("record", "--pid", str(first.process.pid), "--threads", "--gil"),
                *("--rate", str(load.profile_rate), "--nonblocking"),
                *("--format", "raw", "--output", str(load.profile)),
            ],
            stdout=subprocess.DEVNULL,
        )
    counted_before = [meters.scrape(one.base, TOKEN) for one in served]
    spent_before = [one.spent() for one in served]
    plane_before = {p.pid: sum(p.cpu_times()[:2]) for p in plane}
    machine_before = sum(psutil.cpu_times()[:3])
    database = {p.pid: p for p in database_processes(load.database)}
    database_before = {pid: _cpu(p) for pid, p in database.items()}
    start = time.monotonic()
    jobs = _alternating(served, steady, load.runs * len(served))
    uids = clients.each(jobs)
    submit_s = time.monotonic() - start
    spent = [one.spent().since(before) for one, before in zip(served, spent_before, strict=True)]
    plane_cpu = sum(sum(p.cpu_times()[:2]) - plane_before[p.pid] for p in plane)
    machine_cpu = sum(psutil.cpu_times()[:3]) - machine_before
    database |= {p.pid: p for p in database_processes(load.database)}  # backends opened since
    database_cpu = sum(
        max(0.0, _cpu(p) - database_before.get(pid, 0.0)) for pid, p in database.items()
    )
    submitted = [set(uids[i :: len(served)]) for i in range(len(served))]
    print(
        f"submitted {len(uids)} runs in {submit_s:.1f} s: "
        f"{len(uids) / submit_s:.1f} runs/s from {load.clients} clients"
        + (f", to {len(served)} services in turn" if len(served) > 1 else "")
    )
    for one, used in zip(served, spent, strict=True):
        print(
            f"{one.label}: service CPU while submitting: {used.cpu:.1f} s, "
            f"{used.cpu / load.runs * 1000:.2f} ms per run ({used.system / used.cpu:.0%} "
            f"in the kernel; {used.switches[0] / load.runs:.1f} voluntary and "
            f"{used.switches[1] / load.runs:.1f} involuntary context switches per run) -> one "
            f"core of the service alone would accept {load.runs / used.cpu:.0f} runs/s"
        )
    if len(served) > 1:
        print(
            f"ratio of this tree's CPU per run to {served[1].label}'s: "
            f"{spent[0].cpu / spent[1].cpu:.3f}"
        )
    if load.database is not None:
        print(
            f"PostgreSQL's CPU while submitting: {database_cpu:.1f} s, "
            f"{database_cpu / len(uids) * 1000:.1f} ms per run, "
            f"{database_cpu / machine_cpu:.0%} of the machine's"
        )
    services_cpu = sum(used.cpu for used in spent)
    print(
        f"CPU while submitting, of {machine_cpu:.1f} s used on the machine: "
        + ", ".join(
            f"{'service' if len(served) == 1 else one.label} {used.cpu / machine_cpu:.0%}"
            for one, used in zip(served, spent, strict=True)
        )
        + f", control plane and kwok {plane_cpu / machine_cpu:.0%}"
        f" ({plane_cpu / len(uids) * 1000:.1f} ms per pod), everything else "
        f"{1 - (services_cpu + plane_cpu) / machine_cpu:.0%}"
    )
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and any(
        one.bench.count(mine) < load.runs for one, mine in zip(served, submitted, strict=True)
    ):
        time.sleep(2)
    all_running_s = time.monotonic() - start
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(timeout=60)
    if profiler is not None and load.profile:
        by_thread = per_thread(spent[0].threads, thread_names(load.profile))
        print("service CPU while submitting, by thread (ms per run):")
        for name, seconds in by_thread.most_common():
            print(f"  {name}: {seconds / load.runs * 1000:.2f}")
    latencies: list[list[float]] = []
    live_kib: list[float] = []
    for one, mine, idle in zip(served, submitted, rss_idle, strict=True):
        done = [r for r in one.bench.records() if r.started_at is not None and r.uid in mine]
        latencies.append([started(r) - r.created_at for r in done])
        rss_live = psutil.Process(one.process.pid).memory_info().rss
        live_kib.append((rss_live - idle) / max(len(done), 1) / 1024)
        print(
            f"{one.label}: {len(done)}/{load.runs} reached Running {all_running_s:.1f} s after "
            f"the first submit; accept -> Running p50 {statistics.median(latencies[-1]):.2f} s, "
            f"p99 {percentile(latencies[-1], 0.99):.2f} s; service resident memory with "
            f"{len(done)} live runs: {rss_live / 2**20:.0f} MiB, {live_kib[-1]:.1f} KiB per "
            f"live run over {idle / 2**20:.0f} MiB at the start"
        )
    restart: dict[str, Any] = {}
    if load.restart:
        submit = partial(clients.submit, first.base)
        process, base, restart = restarted(first.bench, first.process, submit, load.clients)
        first.process, first.base = process, base
        counted_before[0] = Counter()  # the new service counts from zero
    threshold = 2.0
    stuck = [
        {
            "function": one.bench.function("stuck", {}, "1000"),
            "state_thresholds": {"pending_not_scheduled": "2s"},
        }
        for one in served
    ]
    breach_uids = clients.each(_alternating(served, stuck, load.breaches * len(served)))
    breaches = [set(breach_uids[i :: len(served)]) for i in range(len(served))]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(
        one.bench.count(mine, "aborted") < load.breaches
        for one, mine in zip(served, breaches, strict=True)
    ):
        time.sleep(1)
    lags: list[list[float]] = []
    aborted: list[int] = []
    for one, mine in zip(served, breaches, strict=True):
        stopped = [r for r in one.bench.records() if r.uid in mine and r.state == "aborted"]
        aborted.append(len(stopped))
        lags.append([])
        for record in stopped:
            pending = next(t.at for t in record.transitions if t.state == "pending")
            ended = next(t.at for t in record.transitions if t.state in ("aborting", "aborted"))
            lags[-1].append(ended - (pending + threshold))
        if lags[-1]:
            print(
                f"{one.label}: {len(stopped)}/{load.breaches} aborted by their threshold; "
                f"detection after the deadline p50 {statistics.median(lags[-1]):.2f} s, "
                f"p99 {percentile(lags[-1], 0.99):.2f} s"
            )
    completed: list[int | None] = [None] * len(served)
    if load.run_seconds < 3600:
        deadline = time.monotonic() + load.run_seconds + 900
        while True:
            ended = [
                one.bench.count(mine, "completed")
                for one, mine in zip(served, submitted, strict=True)
            ]
            completed = list(ended)
            if min(ended) >= load.runs or time.monotonic() > deadline:
                break
            time.sleep(5)
        print(f"{', '.join(map(str, completed))}/{load.runs} completed")
    rss = [psutil.Process(one.process.pid).memory_info().rss for one in served]
    counts = []
    for one, before, size in zip(served, counted_before, rss, strict=True):
        print(f"{one.label}: service resident memory: {size / 2**20:.0f} MiB")
        # Counted over the whole benchmark (since the restart, with --restart): the runs, their
        # breaches, nothing else.
        counts.append(
            meters.per_run(before, meters.scrape(one.base, TOKEN), load.runs + load.breaches)
        )
        print(f"{one.label}: per run (of all submitted), what the service counted:")
        for key, value in counts[-1].items():
            print(f"  {key}: {value}")
    summaries = [
        {
            "nodes": load.nodes,
            "runs": load.runs,
            "clients": load.clients,
            "submit_per_s": round(load.runs / submit_s, 1),
            "service_cpu_ms_per_run": round(used.cpu / load.runs * 1000, 2),
            "service_cpu_share": round(used.cpu / machine_cpu, 2),
            "control_plane_cpu_share": round(plane_cpu / machine_cpu, 2),
            "context_switches_per_run": round(sum(used.switches) / load.runs, 1),
            **(
                {
                    "database_cpu_ms_per_run": round(database_cpu / len(uids) * 1000, 1),
                    "database_cpu_share": round(database_cpu / machine_cpu, 2),
                }
                if load.database is not None
                else {}
            ),
            "reached_running": len(latency),
            "running_p50_s": round(statistics.median(latency), 2),
            "running_p99_s": round(percentile(latency, 0.99), 2),
            "aborted": stopped,
            "breach_p99_s": round(percentile(lag, 0.99), 2) if lag else None,
            "completed": ended,
            "service_rss_mib": round(size / 2**20),
            "live_run_kib": round(kib, 1),
            "per_run": spent_counts,
        }
        for used, latency, stopped, lag, ended, size, kib, spent_counts in zip(
            spent, latencies, aborted, lags, completed, rss, live_kib, counts, strict=True
        )
    ]
    summary = summaries[0] | restart
    if len(served) > 1:
        summary["beside"] = summaries[1] | {"tree": str(served[1].tree)}
        summary["cpu_ratio"] = round(spent[0].cpu / spent[1].cpu, 3)
    return summary


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
        "--profile-rate",
        type=int,
        default=Load.profile_rate,
        help="py-spy's samples per second with --profile",
    )
    parser.add_argument(
        "--beside",
        type=Path,
        help="another runplane source tree (a git worktree of an earlier commit, say): its "
        "service runs beside this tree's, on as many nodes of its own, and the runs alternate "
        "between the two, so both are measured in the same seconds; prints the ratio of their "
        "CPU per run",
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
        shutil.rmtree(work, ignore_errors=True)  # the services' databases and run homes
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a run costs the service in units that do not depend on the machine: requests to the
API server, watch events, SQL statements, placement evaluations (:mod:`runplane.meters`).

Time per run is measured by ``bench/service_runs.py``; a timed test would pass or fail with the
machine's load. These budgets hold on any machine, so work that creeps into every run's path (a
request per pod repeated while it runs, a query per event, a placement per submission) fails
here. Each budget is what a run needs, with the reason in a comment; a change that needs more
says why in the same place.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import runplane
from testbed import meters, serve, topology
from testbed.pytest_plugin import TestbedCluster

TOKEN = "costs-token-for-the-tests"
RUNS = 40

#: Per run, at most (an ``=`` budget is exact).
BUDGETS = {
    # Its pod, created once: the bootstrap's ConfigMap and the namespace exist already.
    "kube_requests{method=POST,resource=pods}": 1.0,
    # Its output: a kwok node serves no logs, so a pod's node is asked at most once while it
    # runs (then its other pods wait for that node's answer) and once when the pod ends.
    "kube_requests{method=GET,resource=pods/log}": 2.0,
    # Nothing else: no read-back of what was created, no list per run.
    "kube_requests": 3.0,
    # The pod's own changes as the watch reports them: created, scheduled, started (kwok
    # reports ready with it), succeeded; the API server may split one into two.
    "kube_watch_events{watch=pod}": 6.0,
    # Its record: the run, its first transition and attempt, and the count of runs per
    # state, in one transaction (5; a function with labels adds their insert). Then a burst
    # per pod event (created, scheduled, started, ended) when no other run's event shares
    # it: a transaction loading the burst's runs with their attempts in one select and
    # updating them (4 x 3), the transitions to pending, running and completed (3) and the
    # counts' change with each (3), the attempt's start and end (2). Bursts that hold several
    # runs' events cost less per run.
    "sql_statements": 25.0,
    # A run of one pod is placed by the cluster's scheduler, never by runplane.
    "placement_evaluations": 0.0,
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("costs")


@pytest.fixture(scope="module")
def service(testbed_cluster: TestbedCluster, home: Path) -> Iterator[str]:
    values = testbed_cluster.service_env(home, TOKEN)
    values["RUNPLANE_SERVICE__TOKENS"] = json.dumps(
        [{"token": TOKEN, "user": "ci", "role": "admin"}]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")} | values
    process, url = serve.start_service(env, home / "service.log")
    try:
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


#: Aborted by a threshold, per run, at most (the service's watch has listed its pods).
ABORTS = 20
ABORT_BUDGETS = {
    # Its pod created; once the threshold is breached, the abort's reason written on it and
    # the pod deleted.
    "kube_requests{method=POST,resource=pods}": 1.0,
    "kube_requests{method=PATCH,resource=pods}": 1.0,
    "kube_requests{method=DELETE,resource=pods}": 1.0,
    # Nothing else: the run's pods come from the synced watch, not from a list (the API
    # server filters every pod of the namespace to answer one), and a pod runplane made has
    # no operator workload to look for. (And the bootstrap's ConfigMap, once per service,
    # when no run before these made it.)
    "kube_requests": 3.0 + 1 / ABORTS,
    "kube_requests{method=LIST,resource=pods}": 0.0,
}


def job(tmp_path: Path, cpu: str = "100m") -> dict[str, object]:
    code = tmp_path / "job.py"
    code.write_text("def handler(context):\n    return 1\n")
    fn = runplane.code_to_function(
        "costs", filename=str(code), handler="handler", image="registry.example/costs:1"
    )
    fn.with_requests(cpu=cpu, mem="16Mi").with_node_selection(
        node_selector={topology.LIFECYCLE_LABEL: topology.ON_DEMAND}
    )
    fn.spec.annotations = {"runplane.io/test-duration": "3s"}
    return fn.to_dict()


def states(home: Path, uids: set[str] | None = None) -> list[str]:
    """The runs' states (of ``uids``, or all), read from the service's database file by this
    process: asking the service would add the question's own statements to what the runs
    cost."""
    with sqlite3.connect(f"file:{home / 'service.db'}?mode=ro", uri=True) as database:
        rows = database.execute("SELECT uid, state FROM runs")
        return [state for uid, state in rows if uids is None or uid in uids]


def client(service: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{service}/api/v1", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
    )


def test_a_run_costs_what_its_budget_says(service: str, home: Path, tmp_path: Path) -> None:
    api = client(service)
    before = meters.scrape(service, TOKEN)
    body = {"function": job(tmp_path)}
    uids = {api.post("/runs", json=body).raise_for_status().json()["uid"] for _ in range(RUNS)}
    assert len(uids) == RUNS
    deadline = time.monotonic() + 120
    while (now := states(home)) != ["completed"] * RUNS:
        assert time.monotonic() < deadline, f"runs not completed: {sorted(now)}"
        time.sleep(0.5)
    spent = meters.per_run(before, meters.scrape(service, TOKEN), RUNS)
    over = {k: (spent.get(k, 0.0), most) for k, most in BUDGETS.items() if spent.get(k, 0.0) > most}
    assert not over, f"over budget per run (spent, budget): {over}; all counts: {spent}"
    assert spent["kube_requests{method=POST,resource=pods}"] == 1.0


def test_an_abort_lists_nothing_once_the_watch_has_synced(
    service: str, home: Path, tmp_path: Path
) -> None:
    api = client(service)
    before = meters.scrape(service, TOKEN)
    # More CPU than any node has: never scheduled, aborted by its threshold two seconds on.
    body = {
        "function": job(tmp_path, cpu="1000"),
        "state_thresholds": {"pending_not_scheduled": "2s"},
    }
    uids = {api.post("/runs", json=body).raise_for_status().json()["uid"] for _ in range(ABORTS)}
    deadline = time.monotonic() + 120
    while (now := states(home, uids)) != ["aborted"] * ABORTS:
        assert time.monotonic() < deadline, f"runs not aborted: {sorted(now)}"
        time.sleep(0.5)
    spent = meters.per_run(before, meters.scrape(service, TOKEN), ABORTS)
    over = {
        k: (spent.get(k, 0.0), most)
        for k, most in ABORT_BUDGETS.items()
        if spent.get(k, 0.0) > most
    }
    assert not over, f"over budget per aborted run (spent, budget): {over}; all counts: {spent}"
    assert spent["kube_requests{method=DELETE,resource=pods}"] == 1.0

"""Project quotas on the embedded default: runs of a project beyond its quota wait in order,
saying why in the words a cluster's queue uses, borrow idle quota of the other projects and
give it back first; a quota an admin changes in another process on the machine decides this
one's runs at their next admission."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from runplane.runs import Reason, RunRecord
from runplane.service.embedded import EmbeddedService
from runplane.spec import Function
from runplane.spec.run_options import RunOptions

HOLD = """
import pathlib, time

def hold(gate: str):
    while not pathlib.Path(gate).exists():
        time.sleep(0.05)
"""


class Projects:
    def __init__(self, make: Callable[..., Function], service: EmbeddedService, gates: Path):
        self.make, self.service, self.gates = make, service, gates

    def submit(self, project: str, name: str, cpu: str = "500m", priority: str = "medium") -> str:
        fn = (
            self.make(HOLD, handler="hold", name=name, project=project)
            .with_requests(cpu=cpu, mem="64Mi")
            .with_priority_class(priority)
        )
        gate = str(self.gates / name)
        return self.service.submit(fn, RunOptions(params={"gate": gate})).uid

    def release(self, name: str) -> None:
        (self.gates / name).touch()

    def until(self, uid: str, check: Callable[[RunRecord], bool], what: str) -> RunRecord:
        deadline = time.monotonic() + 60
        while True:
            record = self.service.get(uid)
            if check(record):
                return record
            assert time.monotonic() < deadline, f"{what}: {record.state} {record.status_text!r}"
            time.sleep(0.05)

    def running(self, uid: str) -> RunRecord:
        return self.until(uid, lambda r: r.state == "running", "running")

    def says(self, uid: str, text: str) -> RunRecord:
        record = self.until(uid, lambda r: r.status_text == text, text)
        assert record.state == "pending"
        assert record.reason == Reason.WAITING_FOR_QUOTA
        return record


def _projects(make_function, service, tmp_path) -> Projects:
    for name in ("team-a", "team-b"):
        service.create_project(name, {})
    gates = tmp_path / "gates"
    gates.mkdir()
    return Projects(make_function, service, gates)


def test_runs_beyond_their_projects_quota_wait_in_priority_order_saying_why(
    make_function: Callable[..., Function], service: EmbeddedService, tmp_path: Path
):
    runs = _projects(make_function, service, tmp_path)
    service.set_project_quota(
        "team-a", "on-demand", {"cpu": {"nominal": "500m", "borrowing_limit": "0"}}
    )
    service.set_project_quota("team-b", "on-demand", {"cpu": {"nominal": "1", "lending_limit": 0}})
    first = runs.submit("team-a", "first")
    runs.running(first)
    low = runs.submit("team-a", "low", priority="low")
    runs.says(
        low,
        "waiting for quota: project team-a needs 0.5 CPUs more on on-demand; no run ahead of it",
    )
    high = runs.submit("team-a", "high", priority="high")
    runs.says(
        high,
        "waiting for quota: project team-a needs 0.5 CPUs more on on-demand; no run ahead of it",
    )
    runs.says(
        low, "waiting for quota: project team-a needs 0.5 CPUs more on on-demand; 1 run ahead of it"
    )
    other = runs.submit("team-b", "other")  # its own quota: not held up by team-a's queue
    runs.running(other)
    view = service.project_quotas("team-a")["flavors"]["on-demand"]["cpu"]
    assert view == {"nominal": "500m", "borrowing_limit": "0", "lending_limit": None, "used": "0.5"}

    runs.release("first")
    runs.running(high)  # high before low
    runs.says(
        low,
        "waiting for quota: project team-a needs 0.5 CPUs more on on-demand; no run ahead of it",
    )
    runs.release("high")
    runs.running(low)
    for name in ("low", "other"):
        runs.release(name)
    for uid in (first, high, low, other):
        assert service.wait(uid, timeout=60).state == "completed"


def test_idle_quota_is_borrowed_and_given_back_first(
    make_function: Callable[..., Function], service: EmbeddedService, tmp_path: Path
):
    runs = _projects(make_function, service, tmp_path)
    service.set_project_quota("team-a", "on-demand", {"cpu": "500m"})
    service.set_project_quota("team-b", "on-demand", {"cpu": "1"})
    own = runs.submit("team-a", "own")
    borrowed = runs.submit("team-a", "borrowed")  # team-b's idle quota
    runs.running(own)
    runs.running(borrowed)
    lender = runs.submit("team-b", "lender", cpu="1")
    runs.says(
        lender,
        "waiting for quota: project team-b needs 0.5 CPUs more on on-demand; no run ahead of it",
    )
    more = runs.submit("team-a", "more")  # team-b wants its quota back: no more borrowing
    runs.until(
        more, lambda r: r.status_text.startswith("waiting for quota: project team-a needs"), "quota"
    )

    runs.release("borrowed")
    runs.running(lender)  # given back before team-a borrows again
    assert service.get(more).state == "pending"
    for name in ("own", "lender", "more"):
        runs.release(name)
    for uid in (own, borrowed, lender, more):
        assert service.wait(uid, timeout=60).state == "completed"


def test_a_quota_wait_is_pending_not_scheduled_for_the_thresholds(
    make_function: Callable[..., Function], service: EmbeddedService, tmp_path: Path
):
    runs = _projects(make_function, service, tmp_path)
    service.set_project_quota(
        "team-a", "on-demand", {"cpu": {"nominal": "0", "borrowing_limit": 0}}
    )
    fn = (
        make_function(HOLD, handler="hold", name="bounded", project="team-a")
        .with_requests(cpu="500m", mem="64Mi")
        .set_state_thresholds({"pending_not_scheduled": "1s"})
    )
    uid = service.submit(fn, RunOptions(params={"gate": str(runs.gates / "never")})).uid
    record = service.wait(uid, timeout=60)
    assert record.state == "aborted"
    assert record.status_text == (
        "Run aborted due to exceeded state threshold: pending_not_scheduled (last reason: "
        "waiting for quota: project team-a needs 0.5 CPUs more on on-demand; no run ahead of it)"
    )


def test_a_quota_changed_by_another_process_on_the_machine_takes_effect_here(
    make_function: Callable[..., Function], service: EmbeddedService, tmp_path: Path
):
    runs = _projects(make_function, service, tmp_path)
    service.set_project_quota(
        "team-a", "on-demand", {"cpu": {"nominal": "500m", "borrowing_limit": "0"}}
    )
    first = runs.submit("team-a", "first")
    runs.running(first)
    second = runs.submit("team-a", "second")
    runs.says(
        second,
        "waiting for quota: project team-a needs 0.5 CPUs more on on-demand; no run ahead of it",
    )
    # An admin raises it with another runplane process on the same home: this process's
    # service is never told, its waiting run starts at its next admission.
    raised = subprocess.run(
        [sys.executable, "-m", "runplane", "project", "quota", "team-a", "--cpu", "1"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert raised.returncode == 0, raised.stderr
    runs.running(second)
    for name in ("first", "second"):
        runs.release(name)
    for uid in (first, second):
        assert service.wait(uid, timeout=60).state == "completed"

"""The chaos benchmark's short form, in CI: runs with retries while spot nodes are deleted
under them all complete, nothing is duplicated, attempts add up, and a lost attempt is running
again elsewhere within the goal (bench/chaos.py runs the long form)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos import run_chaos
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed

#: Spot node loss -> replacement Running.
GOAL_SECONDS = 10.0


def test_runs_survive_spot_nodes_deleted_under_them(
    testbed_cluster: TestbedCluster, tmp_path: Path
) -> None:
    report = run_chaos(
        testbed_cluster.api,
        testbed_cluster.kubeconfig,
        runs=20,
        run_seconds=8,
        spot_nodes=4,
        on_demand_nodes=2,
        kill_every=1.5,
        kills=6,
        workdir=tmp_path,
        seed=7,
    )
    assert report.completed == report.runs, report.not_completed
    assert report.duplicates == []
    assert report.mismatches == []
    assert report.kills > 0
    assert report.lost_attempts > 0, "the kills hit no running attempt"
    assert report.retries == report.lost_attempts
    assert set(report.failed_attempt_classes) <= {"node_lost", "preempted"}
    assert report.replacement_s["n"] > 0
    assert report.replacement_s["p50"] <= GOAL_SECONDS, report.replacement_s
    assert report.replacement_s["max"] <= 2 * GOAL_SECONDS, report.replacement_s

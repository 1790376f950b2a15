"""The service benchmark's short form, in CI: runs submitted through the API to kwok nodes all
reach Running and end, threshold breaches are aborted, and a restart under load loses and
repeats no run's change (``bench/service_runs.py`` runs the long form and reports the times).
Its numbers are printed, not asserted: the budgets that hold on any machine are counts
(``test_run_costs.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.service_runs import Load, measure
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed


def test_runs_reach_running_end_and_survive_a_restart(
    testbed_cluster: TestbedCluster, tmp_path: Path
) -> None:
    load = Load(nodes=10, runs=100, clients=4, breaches=10, run_seconds=20, restart=True)
    summary = measure(
        testbed_cluster.api,
        testbed_cluster.kubeconfig,
        tmp_path,
        load,
        namespace=testbed_cluster.namespace,
    )
    assert summary["reached_running"] == load.runs
    assert summary["completed"] == load.runs
    assert summary["aborted"] == load.breaches
    assert summary["restart_runs"] == load.runs + 100
    assert summary["restart_wrong"] == 0, "a run that ended around the restart lost a change"
    assert summary["restart_changed"] == 0, "the restart changed a run's recorded history"

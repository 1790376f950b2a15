"""Budgets on the embedded default: a run its project's budget holds stays pending, saying
why, and starts once the budget is raised; a fixed-duration job's cost estimated before it
starts is within 5% of what it then cost."""

from __future__ import annotations

import json

import pytest

from runplane.config import load_settings
from runplane.runs import Reason, RunState
from runplane.service.costs import configured, run_cost
from runplane.service.embedded import EmbeddedService

#: The job runs 4 seconds from its process's start (when its attempt is recorded started),
#: whatever its interpreter took to start: a fixed duration.
FIXED = """
import time

import psutil


def handler(context):
    time.sleep(max(psutil.Process().create_time() + 4.0 - time.time(), 0.0))
"""


def test_a_held_run_stays_pending_and_starts_once_the_budget_is_raised(
    service, make_function
) -> None:
    service.set_budget("team-a", {"amount": "0", "action": "hold"})
    fn = make_function("def handler(context):\n    return 7\n", project="team-a")
    held = service.submit(fn)
    assert (held.state, held.reason) == (RunState.PENDING, Reason.BUDGET)
    assert held.status_text == "budget: project team-a spent 0.00 of 0 this month"
    assert service.release_held() == []  # the monitor's look: still held
    assert service.wait(held.uid, timeout=1).state is RunState.PENDING
    assert service.get(held.uid).status_text == held.status_text

    raised = service.set_budget("team-a", {"amount": "500", "action": "hold"})
    assert raised["reached"] is False
    done = service.wait(held.uid, timeout=60)
    assert done.state is RunState.COMPLETED, done
    assert done.results["return"] == 7


@pytest.fixture
def priced(monkeypatch: pytest.MonkeyPatch) -> None:
    """On-demand nodes of 2 CPUs priced 36 an hour; this machine, labelled no group, is one."""
    groups = {"on-demand": {"hourly_price": 36.0, "cpu": "2", "memory": "4Gi"}}
    monkeypatch.setenv("RUNPLANE_SERVICE__NODE_GROUPS", json.dumps(groups))


def test_a_fixed_duration_jobs_estimate_is_within_5_percent_of_its_cost(
    priced, make_function
) -> None:
    settings = load_settings()
    service = EmbeddedService(settings).start()
    try:
        fn = make_function(FIXED, name="fixed", project="estimates")
        fn.with_requests(cpu="1", mem="64Mi")
        before = service.estimate(fn)["estimate"]
        assert before["seconds"] is None
        assert before["hourly"] == pytest.approx(18.0)  # half the node's CPU
        assert before["text"].startswith("unknown duration (no completed run of this function")
        for _ in range(2):
            past = service.wait(service.submit(fn).uid, timeout=120)
            assert past.state is RunState.COMPLETED, past
        expected = service.estimate(fn)["estimate"]
        assert expected["runs"] == 2
        assert expected["text"].startswith("expected cost ")
        ran = service.wait(service.submit(fn).uid, timeout=120)
        assert ran.state is RunState.COMPLETED, ran
        assert ran.attempts[0].node_group == "on-demand"
        cost = run_cost(ran, *configured(settings))
        assert cost is not None
        assert expected["cost"] == pytest.approx(cost.realised, rel=0.05)
    finally:
        service.close()

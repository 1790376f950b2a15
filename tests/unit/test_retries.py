"""The failure taxonomy, retry policies and the retry decision, on plain records."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import runplane
from runplane.config import Settings
from runplane.errors import InvalidValueError
from runplane.rendering.lints import Effective, stateful_job_on_spot
from runplane.runs import (
    RETRYABLE,
    THRESHOLD_TEXT,
    AttemptRecord,
    FailureClass,
    Reason,
    RunRecord,
    RunState,
    classify,
)
from runplane.runtimes.events import RunEvent
from runplane.service.retries import AttemptPlan, decide, resolve
from runplane.spec.scheduling import PreemptionMode

NOW = 1_000_000.0


@pytest.mark.parametrize(
    ("state", "reason", "message", "expected"),
    [
        (RunState.COMPLETED, "Completed", "", None),
        (RunState.RUNNING, "Running", "", None),
        (RunState.ERROR, "Preempted", "PreemptionByScheduler: ...", FailureClass.PREEMPTED),
        (RunState.ERROR, "Preempted", "DeletionByPodGC: ...", FailureClass.PREEMPTED),
        (RunState.ERROR, "PodDeleted", "pod deleted: ...", FailureClass.PREEMPTED),
        (RunState.ERROR, "Evicted", "The node was low on memory", FailureClass.PREEMPTED),
        (RunState.ERROR, "NodeLost", "node spot-1 was deleted", FailureClass.NODE_LOST),
        (RunState.ERROR, "PodLost", "the run's pod no longer exists", FailureClass.NODE_LOST),
        (RunState.ERROR, "executor lost", "the process ... is gone", FailureClass.NODE_LOST),
        (RunState.ERROR, "OOMKilled", "memory use 300Mi exceeded", FailureClass.OOM),
        (RunState.ERROR, "Error", "the container exited with code 3", FailureClass.ERROR),
        (RunState.ERROR, "LaunchFailed", "could not start", FailureClass.ERROR),
        (RunState.ERROR, "SIGSEGV", "", FailureClass.ERROR),
        (RunState.ABORTED, "Aborted", "aborted by request", FailureClass.ABORTED),
        (RunState.ABORTED, "Orphan", "", FailureClass.ABORTED),
        (
            RunState.ABORTED,
            "ThresholdExceeded",
            f"{THRESHOLD_TEXT}pending_not_scheduled (last reason: 0/3 nodes ...)",
            FailureClass.UNSCHEDULABLE,
        ),
        (
            RunState.ABORTED,
            "ThresholdExceeded",
            f"{THRESHOLD_TEXT}pending_scheduled",
            FailureClass.UNSCHEDULABLE,
        ),
        (
            RunState.ABORTED,
            "ThresholdExceeded",
            f"{THRESHOLD_TEXT}image_pull_backoff",
            FailureClass.IMAGE_PULL,
        ),
        (RunState.ABORTED, "ThresholdExceeded", f"{THRESHOLD_TEXT}running", FailureClass.DEADLINE),
        (RunState.ABORTED, "SpotUnavailable", "no spot node", FailureClass.UNSCHEDULABLE),
    ],
)
def test_every_failed_attempt_has_one_class(
    state: RunState, reason: str, message: str, expected: FailureClass | None
) -> None:
    assert classify(state, reason, message) is expected


def test_an_abort_is_the_one_class_never_retried() -> None:
    assert frozenset(FailureClass) - RETRYABLE == {FailureClass.ABORTED}
    with pytest.raises(InvalidValueError, match="an aborted run is never retried"):
        runplane.new_function("f").with_retries(on=("preempted", "aborted"))
    with pytest.raises(InvalidValueError, match="failure classes are preempted, node_lost"):
        runplane.new_function("f").with_retries(on=("preemted",))


def test_with_retries_changes_only_what_it_is_given() -> None:
    fn = runplane.new_function("f").with_retries(3, on="oom", backoff="10s")
    fn.with_retries(budgets={"oom": 2}, deadline="2h").with_spot_fallback(after_preemptions=1)
    retry = fn.to_dict()["spec"]["retry"]
    assert retry == {
        "max_attempts": 3,
        "on": ["oom"],
        "backoff": "10s",
        "budgets": {"oom": 2},
        "deadline": "2h",
        "spot_fallback": {"after_preemptions": 1},
    }
    assert runplane.Function.from_dict(fn.to_dict()).spec.retry == fn.spec.retry
    before = fn.to_dict()
    for bad in (
        {"max_attempts": 0},
        {"backoff": "soon"},
        {"backoff": -1},
        {"budgets": {"oom": -1}},
        {"memory_factor": 0.5},
        {"deadline": "tomorrow"},
    ):
        with pytest.raises(InvalidValueError, match="spec.retry"):
            fn.with_retries(**bad)
    assert fn.to_dict() == before  # a refused change leaves the function as it was


def test_the_policy_is_the_functions_over_the_services_capped_by_the_admins() -> None:
    settings = Settings(
        function_defaults={"retry": {"backoff": "30s", "on": ["preempted"]}},
        retry_limits={"max_attempts": 4, "min_backoff": "5s", "max_memory": "1Gi"},
    )
    plain = resolve(runplane.new_function("f"), settings)
    assert (plain.max_attempts, plain.backoff, plain.on) == (1, 30, {FailureClass.PREEMPTED})
    assert plain.fallback_after == 2
    assert plain.fallback_pending == 600
    assert plain.max_memory == 2**30
    shorthand = runplane.new_function("f")
    shorthand.spec.retries = 2
    assert resolve(shorthand, settings).max_attempts == 3
    greedy = runplane.new_function("f").with_retries(50, backoff=0, on=["oom"])
    policy = resolve(greedy, settings)
    assert (policy.max_attempts, policy.backoff, policy.on) == (4, 5, {FailureClass.OOM})
    assert [policy.delay(n) for n in (1, 2, 3)] == [5, 10, 20]
    capped = resolve(
        runplane.new_function("f").with_retries(backoff="1m", max_backoff="90s"), settings
    )
    assert [capped.delay(n) for n in (1, 2, 3)] == [60, 90, 90]


def test_the_lint_is_silenced_by_either_form() -> None:
    def lint(fn: runplane.Function) -> Any:
        return stateful_job_on_spot(Effective(fn, {}, {}, 0, PreemptionMode.ALLOW))

    assert lint(runplane.new_function("f")) is not None
    assert lint(runplane.new_function("f").with_retries(2)) is None
    assert lint(runplane.new_function("f").with_retries(1)) is not None


def record(fn: runplane.Function, attempts: list[AttemptRecord], **fields: Any) -> RunRecord:
    values: dict[str, Any] = {
        "uid": "a" * 32,
        "project": "default",
        "name": fn.metadata.name,
        "runtime": "kubernetes",
        "state": RunState.RUNNING,
        "reason": "",
        "status_text": "",
        "params": {},
        "inputs": {},
        "thresholds": {},
        "priority_class": "medium",
        "requests": {"cpu": "1", "memory": "128Mi"},
        "limits": {"memory": "128Mi"},
        "results": {},
        "peak_memory_bytes": 0,
        "cpu_seconds": 0.0,
        "created_at": NOW - 60,
        "updated_at": NOW,
        "state_since": NOW,
        "started_at": NOW - 30,
        "ended_at": None,
        "function": fn.to_dict(),
        "attempts": attempts,
        "attempt": attempts[-1].number,
    }
    return RunRecord(**{**values, **fields})


def ended(state: RunState, reason: str, message: str = "") -> RunEvent:
    """An attempt's end as the service hands it to the decision: classified."""
    return RunEvent("0" * 32, state, reason=reason, message=message).classified()


def attempt(number: int, failure: str = "", **fields: Any) -> AttemptRecord:
    values: dict[str, Any] = {
        "number": number,
        "node": "spot-1",
        "process_id": None,
        "started_at": NOW - 10,
        "ended_at": None,
        "exit_code": None,
        "reason": "",
        "requests": {"cpu": "1", "memory": "128Mi"},
        "limits": {"memory": "128Mi"},
        "preemption_mode": "constrain",
        "spot": True,
        "failure": failure,
    }
    return AttemptRecord(**{**values, **fields})


def test_a_preempted_attempt_is_retried_after_its_back_off() -> None:
    fn = runplane.new_function("f").with_preemption_mode("constrain").with_retries(3, backoff="10s")
    decision, why = decide(
        record(fn, [attempt(1)]),
        ended(RunState.ERROR, "Preempted", "spot reclaim"),
        Settings(),
        NOW,
    )
    assert decision is not None, why
    assert (decision.attempt, decision.due_at) == (2, NOW + 10)
    assert decision.preemption_mode == "constrain"  # one preemption: still spot
    assert decision.adjustments == ""
    assert decision.message.startswith("attempt 2 of 3 starts in 10s: attempt 1 ended preempted")


def test_what_is_not_retried_says_why() -> None:
    fn = runplane.new_function("f").with_retries(3, on=["preempted"], budgets={"preempted": 1})
    first = record(fn, [attempt(1)])
    assert decide(first, ended(RunState.ERROR, "Error", "exit 1"), Settings(), NOW) == (
        None,
        "not retried: retry.on does not name error",
    )
    assert decide(first, ended(RunState.ABORTED, "Aborted", "by request"), Settings(), NOW) == (
        None,
        "",
    )
    second = record(fn, [attempt(1, "preempted"), attempt(2)])
    assert decide(second, ended(RunState.ERROR, "Preempted"), Settings(), NOW) == (
        None,
        "not retried: the retry budget for preempted (1) is spent",
    )
    last = record(fn, [attempt(1, "error"), attempt(2, "error"), attempt(3)])
    assert decide(last, ended(RunState.ERROR, "Preempted"), Settings(), NOW)[1] == (
        "attempt 3 of 3: no attempts left"
    )
    late = runplane.new_function("f").with_retries(3, deadline="1 minute", backoff="30s")
    assert (
        decide(record(late, [attempt(1)]), ended(RunState.ERROR, "NodeLost"), Settings(), NOW)[1]
        == "not retried: the next attempt would start after retry.deadline"
    )
    # With no retries asked for, a run ends as it always did, with nothing added.
    assert decide(
        record(runplane.new_function("f"), [attempt(1)]),
        ended(RunState.ERROR, "Preempted"),
        Settings(),
        NOW,
    ) == (None, "")


def test_after_two_preemptions_on_spot_the_next_attempt_is_on_demand() -> None:
    fn = runplane.new_function("f").with_preemption_mode("constrain").with_retries(5, backoff=0)
    history = [attempt(1, "preempted"), attempt(2)]
    decision, _ = decide(record(fn, history), ended(RunState.ERROR, "NodeLost"), Settings(), NOW)
    assert decision is not None
    assert decision.preemption_mode == "prevent"
    assert "on-demand nodes (mode prevent): preempted 2 times on spot" in decision.adjustments
    assert AttemptPlan(preemption_mode="prevent").apply(fn).spec.preemption_mode == "prevent"
    # A preemption on an on-demand node (a higher class took its place) is not spot's fault.
    on_demand = [attempt(1, "preempted", spot=False), attempt(2, spot=False)]
    decision, _ = decide(record(fn, on_demand), ended(RunState.ERROR, "Preempted"), Settings(), NOW)
    assert decision is not None
    assert decision.preemption_mode == "constrain"
    # Modes that never use spot have nothing to fall back from.
    prevent = [
        attempt(1, "preempted", preemption_mode="prevent"),
        attempt(2, preemption_mode="prevent"),
    ]
    decision, _ = decide(record(fn, prevent), ended(RunState.ERROR, "Preempted"), Settings(), NOW)
    assert decision is not None
    assert decision.preemption_mode == "prevent"
    assert decision.adjustments == ""


def test_the_fallback_is_per_function_and_per_service() -> None:
    history = [attempt(1, "preempted"), attempt(2)]
    once = runplane.new_function("f").with_preemption_mode("allow").with_retries(5)
    once.with_spot_fallback(after_preemptions=3)
    decision, _ = decide(record(once, history), ended(RunState.ERROR, "Preempted"), Settings(), NOW)
    assert decision is not None
    assert decision.preemption_mode == "constrain"
    never = Settings(function_defaults={"retry": {"spot_fallback": {"after_preemptions": 0}}})
    fn = runplane.new_function("f").with_retries(5)
    decision, _ = decide(record(fn, history), ended(RunState.ERROR, "Preempted"), never, NOW)
    assert decision is not None
    assert decision.preemption_mode == "constrain"


def test_a_spot_wait_falls_back_whatever_the_classes_retried() -> None:
    fn = runplane.new_function("f").with_preemption_mode("constrain").with_retries(2, on=["oom"])
    history = [attempt(1, started_at=None, node="", spot=None)]
    decision, _ = decide(
        record(fn, history), ended(RunState.ABORTED, Reason.SPOT_UNAVAILABLE), Settings(), NOW
    )
    assert decision is not None
    assert decision.preemption_mode == "prevent"
    assert "no spot node was found in time" in decision.adjustments


def test_a_selector_that_asks_for_spot_keeps_the_run_on_spot() -> None:
    fn = runplane.new_function("f").with_preemption_mode("allow").with_retries(5)
    fn.with_node_selection(node_selector={"app.iguazio.com/lifecycle": "preemptible"})
    history = [
        attempt(1, "preempted", preemption_mode="allow"),
        attempt(2, preemption_mode="allow"),
    ]
    decision, _ = decide(record(fn, history), ended(RunState.ERROR, "Preempted"), Settings(), NOW)
    assert decision is not None
    assert decision.preemption_mode == "allow"
    assert "its node selector asks for spot nodes" in decision.adjustments


def test_an_oom_retry_gets_more_memory_up_to_the_caps() -> None:
    fn = runplane.new_function("f").with_retries(5, on=["oom"], backoff=0)
    decision, _ = decide(
        record(fn, [attempt(1)]),
        ended(RunState.ERROR, "OOMKilled"),
        Settings(),
        NOW,
        lambda: 2**32,
    )
    assert decision is not None
    assert (decision.requests["memory"], decision.limits["memory"]) == ("192Mi", "192Mi")
    assert decision.requests["cpu"] == "1"
    assert "memory limit 128Mi -> 192Mi" in decision.adjustments
    plan = AttemptPlan.of(
        dataclasses.replace(attempt(2), requests=decision.requests, limits=decision.limits)
    )
    grown = plan.apply(
        runplane.new_function("f").with_requests(mem="128Mi").with_limits(mem="128Mi")
    )
    assert grown.spec.resources.limits["memory"] == "192Mi"
    # The largest node caps it ...
    decision, _ = decide(
        record(fn, [attempt(1)]),
        ended(RunState.ERROR, "OOMKilled"),
        Settings(),
        NOW,
        lambda: 150 * 2**20,
    )
    assert decision is not None
    assert decision.limits["memory"] == "150Mi"
    # ... and so does the admin; an attempt already at the cap is not retried.
    capped = Settings(retry_limits={"max_memory": "128Mi"})
    assert decide(record(fn, [attempt(1)]), ended(RunState.ERROR, "OOMKilled"), capped, NOW)[1] == (
        "not retried: its memory limit 128Mi is already the most an attempt may get (128Mi: the "
        "largest node's allocatable or retry_limits.max_memory)"
    )
    factor = runplane.new_function("f").with_retries(5, on=["oom"], memory_factor=2)
    decision, _ = decide(
        record(factor, [attempt(1)]), ended(RunState.ERROR, "OOMKilled"), Settings(), NOW
    )
    assert decision is not None
    assert decision.limits["memory"] == "256Mi"


def test_attempts_round_trip_through_json() -> None:
    fn = runplane.new_function("f")
    run = record(fn, [attempt(1, "oom", exit_code=137, node_group="spot", adjustments="x")])
    assert RunRecord.from_json(run.to_json()) == run
    assert run.to_json()["attempts"][0]["failure"] == "oom"


def test_a_record_from_a_newer_service_still_reads() -> None:
    data = record(runplane.new_function("f"), [attempt(1)]).to_json()
    data["something_new"] = 1
    data["attempts"][0]["also_new"] = 2
    assert RunRecord.from_json(data).attempts[0].number == 1


def test_an_oom_retry_starts_from_what_right_sizing_gave_or_asked_for() -> None:
    from runplane.runs import ResizeRecord

    mi = 2**20
    fn = runplane.new_function("f").with_retries(5, on=["oom"], backoff=0)

    def resized(outcome: str, to: int) -> ResizeRecord:
        return ResizeRecord(110.0, 1, 128 * mi, to * mi, None, None, "near", outcome=outcome)

    oom = ended(RunState.ERROR, "OOMKilled")
    grown = dataclasses.replace(record(fn, [attempt(1)]), resizes=[resized("applied", 256)])
    decision, _ = decide(grown, oom, Settings(), NOW, lambda: 2**32)
    assert decision is not None
    assert decision.limits["memory"] == "384Mi"  # 256Mi as resized in place, x1.5
    assert "memory limit 256Mi as resized in place" in decision.adjustments
    refused = dataclasses.replace(record(fn, [attempt(1)]), resizes=[resized("fallback", 1024)])
    decision, _ = decide(refused, oom, Settings(), NOW, lambda: 2**32)
    assert decision is not None
    assert (decision.requests["memory"], decision.limits["memory"]) == ("1024Mi", "1024Mi")
    assert "the size live right-sizing asked for" in decision.adjustments
    decision, _ = decide(refused, oom, Settings(), NOW, lambda: 512 * mi)
    assert decision is not None
    assert decision.limits["memory"] == "512Mi"  # as far as the largest node holds it

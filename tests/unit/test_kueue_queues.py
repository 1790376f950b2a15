"""Kueue's objects as runplane makes them, and what it reads back from Kueue's workloads."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.config import PREEMPTIBLE_PRESETS, PriorityClasses
from runplane.errors import InvalidValueError
from runplane.placement.quotas import ProjectQuota
from runplane.rendering.preemption import apply_preemption_mode
from runplane.runs import Condition, Reason, RunState
from runplane.runtimes.kubernetes import kueue
from runplane.runtimes.kubernetes.kueue_order import QueueOrder
from runplane.runtimes.kubernetes.pod_events import pod_to_event
from runplane.spec.scheduling import PreemptionMode, required_node_terms


def _term_admits(term: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kueue's check of a required node-affinity term against a flavor: only the keys the
    flavor's node labels name are compared (a node of that flavor has them)."""
    for expression in term.get("matchExpressions") or []:
        key = expression["key"]
        if key not in labels:
            continue
        inside = labels[key] in expression.get("values", [])
        if expression["operator"] == "In" and not inside:
            return False
        if expression["operator"] == "NotIn" and inside:
            return False
    return True


def _admissible(affinity: dict[str, Any] | None, tols: list[dict[str, Any]]) -> list[str]:
    """The flavors (in the ClusterQueue's order) a pod rendered so may be admitted to."""
    found = []
    terms = required_node_terms(affinity) or [{}]
    for flavor in kueue.flavors(PREEMPTIBLE_PRESETS["iguazio"]):
        spec = flavor["spec"]
        labels = spec.get("nodeLabels") or {}
        tolerated = all(
            any(t.get("key") == taint["key"] and t.get("value") == taint["value"] for t in tols)
            for taint in spec.get("nodeTaints") or []
        )
        if tolerated and any(_term_admits(term, labels) for term in terms):
            found.append(flavor["metadata"]["name"])
    order = [
        f["name"]
        for f in kueue.cluster_queue("ns", "p", {})["spec"]["resourceGroups"][0]["flavors"]
    ]
    return sorted(found, key=order.index)


@pytest.mark.parametrize(
    ("mode", "flavors"),
    [
        (PreemptionMode.PREVENT, ["on-demand"]),
        (PreemptionMode.CONSTRAIN, ["spot"]),
        (PreemptionMode.ALLOW, ["spot", "on-demand"]),
    ],
)
def test_a_run_is_admitted_only_to_flavors_its_rendering_lets_it_land_on(
    mode: PreemptionMode, flavors: list[str]
) -> None:
    spot = PREEMPTIBLE_PRESETS["iguazio"]
    affinity, tolerations = apply_preemption_mode(mode, {}, None, [], spot)
    assert _admissible(affinity, tolerations) == flavors


def test_flavors_carry_the_presets_labels_and_spot_taint() -> None:
    on_demand, spot = kueue.flavors(PREEMPTIBLE_PRESETS["iguazio"])
    assert on_demand["spec"]["nodeLabels"] == {"app.iguazio.com/lifecycle": "non-preemptible"}
    assert spot["spec"]["nodeLabels"] == {"app.iguazio.com/lifecycle": "preemptible"}
    assert spot["spec"]["nodeTaints"] == [
        {"key": "app.iguazio.com/lifecycle", "value": "preemptible", "effect": "NoSchedule"}
    ]
    eks_spot = kueue.flavors(PREEMPTIBLE_PRESETS["eks"])[1]
    assert "nodeTaints" not in eks_spot["spec"]  # EKS spot groups carry no taint


def test_a_project_queue_borrows_in_one_cohort_and_defaults_to_unlimited() -> None:
    queue = kueue.cluster_queue("runs", "team-a", {"on-demand": {"cpu": "16", "memory": "64Gi"}})
    spec = queue["spec"]
    assert queue["metadata"]["name"] == "runs.team-a"
    assert spec["cohortName"] == kueue.COHORT
    assert spec["preemption"]["reclaimWithinCohort"] == "Any"
    by_flavor = {
        f["name"]: {r["name"]: (r["nominalQuota"], r.get("lendingLimit")) for r in f["resources"]}
        for f in spec["resourceGroups"][0]["flavors"]
    }
    # what the admin set is lent when idle; the unlimited rest is lent to nobody
    assert by_flavor["on-demand"] == {
        "cpu": ("16", None),
        "memory": ("64Gi", None),
        "nvidia.com/gpu": ("10000", "0"),
    }
    assert by_flavor["spot"] == {r: (q, "0") for r, q in kueue.UNLIMITED.items()}
    local = kueue.local_queue("runs", "team-a")
    assert local["metadata"] == {**local["metadata"], "name": "team-a", "namespace": "runs"}
    assert local["spec"] == {"clusterQueue": "runs.team-a"}


@pytest.mark.parametrize(
    ("quotas", "field"),
    [
        ({"gold": {"cpu": "1"}}, "quotas"),
        ({"spot": {"pods": "1"}}, "quotas.spot"),
        ({"spot": {"cpu": "lots"}}, "quotas.spot.cpu"),
    ],
)
def test_bad_quotas_are_refused_naming_the_field(
    quotas: dict[str, dict[str, str]], field: str
) -> None:
    with pytest.raises(InvalidValueError) as caught:
        kueue.check_quotas(quotas)
    assert caught.value.field == field


def test_priority_classes_follow_the_configured_values() -> None:
    classes = {c["metadata"]["name"]: c["value"] for c in kueue.priority_classes(PriorityClasses())}
    assert classes == {"runplane-low": 1000, "runplane-medium": 2000, "runplane-high": 3000}


def _workload(conditions: list[dict[str, Any]], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"labels": {kueue.QUEUE_LABEL: "team-a"}},
        "status": {"conditions": conditions, **status},
    }


def test_a_workload_short_of_quota_says_what_it_needs_and_how_many_are_ahead() -> None:
    said = (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
        "on-demand, 4 more needed"
    )
    waiting = kueue.waiting(
        _workload(
            [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": said}],
            positionInLocalQueue=2,
        )
    )
    assert waiting is not None
    assert waiting.for_quota
    # the words of a quota wait on the embedded default
    assert waiting.message == (
        "waiting for quota: project team-a needs 4 CPUs more on on-demand; 2 runs ahead of it"
    )
    # the runs ahead counted by the runtime (Kueue's visibility API off) take precedence
    counted = kueue.waiting(
        _workload([{"type": "QuotaReserved", "status": "False", "message": said}]), ahead=0
    )
    assert counted is not None
    assert counted.message.endswith("; no run ahead of it")
    # neither known: the wait without a count
    unknown = kueue.waiting(_workload([{"type": "QuotaReserved", "status": "False"}]))
    assert unknown is not None
    assert unknown.message == "waiting in Kueue's queue 'team-a': waiting for Kueue to admit it"
    # far back in a long queue: the capped words of every backend, whatever Kueue said
    for words in (said, "some other word of Kueue's"):
        far = kueue.waiting(
            _workload([{"type": "QuotaReserved", "status": "False", "message": words}]), ahead=21
        )
        assert far is not None
        assert far.message.endswith("; more than 20 runs ahead of it"), far.message


def test_borrowing_and_lending_limits_reach_the_cluster_queue() -> None:
    quota = ProjectQuota(
        {
            "on-demand": ProjectQuota.flavor_of(
                "on-demand",
                {"cpu": {"nominal": "4", "borrowing_limit": "0", "lending_limit": "2"}, "gpus": 1},
            )
        }
    )
    terms = kueue.quota_terms(quota)
    assert terms == {
        "on-demand": {
            "cpu": {"nominalQuota": "4", "borrowingLimit": "0", "lendingLimit": "2"},
            "nvidia.com/gpu": {"nominalQuota": "1"},
        }
    }
    kueue.check_quotas(terms)
    queue = kueue.cluster_queue("runs", "team-a", terms)
    on_demand = next(
        f for f in queue["spec"]["resourceGroups"][0]["flavors"] if f["name"] == "on-demand"
    )
    by_name = {r["name"]: r for r in on_demand["resources"]}
    assert by_name["cpu"] == {
        "name": "cpu",
        "nominalQuota": "4",
        "borrowingLimit": "0",
        "lendingLimit": "2",
    }
    assert by_name["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": "1"}
    with pytest.raises(InvalidValueError) as caught:
        kueue.check_quotas({"spot": {"cpu": {"nominalQuota": "1", "borrowing": "0"}}})
    assert caught.value.field == "quotas.spot.cpu"


def _pending(name: str, priority: int, created: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "uid": name,
            "name": name,
            "namespace": "runs",
            "creationTimestamp": created,
        },
        "spec": {"queueName": "team-a", "priority": priority},
        "status": status,
    }


def test_runs_ahead_follow_kueues_order_priority_then_time_queued() -> None:
    order = QueueOrder()
    for workload in (
        _pending("early", 2000, "2026-01-01T00:00:01Z"),
        _pending("late", 2000, "2026-01-01T00:00:05Z"),
        _pending("urgent", 3000, "2026-01-01T00:00:09Z"),
        _pending("low", 1000, "2026-01-01T00:00:00Z"),
    ):
        order.observe(workload, "team-a")
    order.observe(_pending("elsewhere", 9000, "2026-01-01T00:00:00Z"), "team-b")
    assert [order.ahead(n) for n in ("urgent", "early", "late", "low")] == [0, 1, 2, 3]
    # admitted: no longer waiting, and no longer ahead of the others
    reserved = {"conditions": [{"type": "QuotaReserved", "status": "True"}]}
    order.observe(_pending("early", 2000, "2026-01-01T00:00:01Z", **reserved), "team-a")
    assert order.ahead("early") is None
    assert order.ahead("late") == 1
    order.forget("urgent")
    assert order.ahead("late") == 0
    # evicted because its pods were not ready in time: queued again at its eviction
    timed_out = {
        "conditions": [
            {
                "type": "Evicted",
                "status": "True",
                "reason": "PodsReadyTimeout",
                "lastTransitionTime": "2026-01-01T00:00:07Z",
            }
        ]
    }
    order.observe(_pending("early", 2000, "2026-01-01T00:00:01Z", **timed_out), "team-a")
    assert (order.ahead("late"), order.ahead("early"), order.ahead("low")) == (0, 1, 2)


def _queue(order: QueueOrder, queue: str, count: int, prefix: str) -> list[str]:
    """``count`` workloads queued in ``queue`` one second apart, each told its count on
    arrival as the watch tells it; their uids in Kueue's order."""
    uids = [f"{prefix}{i:02d}" for i in range(count)]
    for i, uid in enumerate(uids):
        order.observe(_pending(uid, 1000, f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"), queue)
        assert order.ahead(uid) == i
    return uids


def test_counts_follow_a_run_ahead_admitted_and_only_moved_queues_are_looked_at() -> None:
    order = QueueOrder()
    a = _queue(order, "team-a", 3, "a")
    b = _queue(order, "team-b", 3, "b")
    # arriving last in its queue moves nobody: nothing to tell again
    assert not order.marked.is_set()
    assert order.stale() == []
    reserved = {"conditions": [{"type": "QuotaReserved", "status": "True"}]}
    order.observe(_pending(a[0], 1000, "2026-01-01T00:00:00Z", **reserved), "team-a")
    assert order.marked.is_set()
    # the two behind the admitted one, told again with their new counts; team-b untouched
    assert order.stale() == a[1:]
    assert [order.ahead(uid) for uid in a[1:]] == [0, 1]
    assert order.stale() == []  # told: nothing until the next move
    # the last one going moves nobody; the one ahead of others going does
    order.forget(a[2])
    assert order.stale() == []
    order.forget(b[0])
    assert order.stale() == b[1:]


def test_only_the_first_runs_of_a_long_queue_are_told_again() -> None:
    order = QueueOrder()
    uids = _queue(order, "team-a", 30, "w")
    order.forget(uids[0])
    # 21 counts said exactly (0 to 20); the one now 21 ahead was told "more than 20" already
    assert order.stale() == uids[1:22]
    # one ahead of all the others: those with an exact count move back one, and the one
    # pushed past 20 ahead is told "more than 20"
    order.observe(_pending("urgent", 5000, "2026-01-01T01:00:00Z"), "team-a")
    assert order.ahead("urgent") == 0  # told by the watch as it arrives
    assert order.stale() == uids[1:22]
    assert order.ahead(uids[21]) == 21
    assert order.stale() == []


def test_an_admitted_workload_waits_for_nothing_and_an_evicted_one_says_why() -> None:
    admitted = _workload([{"type": "Admitted", "status": "True"}])
    assert kueue.waiting(admitted) is None
    evicted = _workload(
        [{"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by high"}]
    )
    assert kueue.evicted(evicted) == ("Preempted", "by high")
    assert kueue.evicted(admitted) is None


def _pod(**extra: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": "p",
            "uid": "u",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"runplane.io/run-uid": "r1", kueue.QUEUE_LABEL: "team-a"},
        },
        "spec": {"schedulingGates": [{"name": kueue.ADMISSION_GATE}]},
        "status": {"phase": "Pending"},
    }
    for key, value in extra.items():
        pod[key].update(value)
    return pod


def test_a_pod_kueue_holds_waits_for_quota_not_for_a_node() -> None:
    event = pod_to_event(_pod())
    assert event is not None
    assert event.state is RunState.PENDING
    assert event.condition == Condition.PENDING_NOT_SCHEDULED
    assert event.reason == kueue.WAITING_FOR_QUOTA
    assert "team-a" in event.message


def test_a_pod_kueue_stops_for_a_higher_priority_ends_preempted_with_kueues_reason() -> None:
    condition = {
        "type": "TerminationTarget",
        "status": "True",
        "reason": "WorkloadEvictedDueToPreempted",
        "message": "Preempted to accommodate a workload (UID: x) due to prioritization",
    }
    event = pod_to_event(
        _pod(spec={"schedulingGates": []}, status={"phase": "Running", "conditions": [condition]}),
        deleted=True,
    )
    assert event is not None
    assert event.state is RunState.ERROR
    assert event.reason == Reason.PREEMPTED
    assert event.message.startswith("WorkloadEvictedDueToPreempted: Preempted")


def test_a_workload_is_labelled_with_its_queue_and_priority() -> None:
    pod: dict[str, Any] = {"kind": "Pod", "metadata": {"labels": {}}}
    kueue.label(pod, "team-a", "high")
    assert pod["metadata"]["labels"] == {
        kueue.QUEUE_LABEL: "team-a",
        kueue.PRIORITY_LABEL: "runplane-high",
    }

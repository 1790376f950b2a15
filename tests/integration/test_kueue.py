"""Kueue as the queue of runs on the testbed: flavors from the spot preset, one queue per project
in one cohort, whole admission of an MPIJob, priorities, and Kueue's words for a waiting run.

Kueue (built from its module by testbed/build.py) runs for this module only
(``testbed.kueue.running``): its webhooks and CRDs are removed afterwards, so the other modules'
runtimes find no Kueue. The runs are placed on kwok nodes; nothing of them executes.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

import runplane
from bench import kueue_admission
from runplane import names
from runplane.bootstrap import Invocation
from runplane.config import Settings
from runplane.placement.quotas import ProjectQuota
from runplane.rendering import RunRef, render
from runplane.runs import Condition, Reason, RunState
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes import KubernetesRuntime
from runplane.runtimes.kubernetes import kueue as rk
from runplane.runtimes.request import build_request
from testbed import kube, mpi_operator, topology
from testbed import kueue as tb_kueue
from testbed.pytest_plugin import TestbedCluster
from tests.integration.test_kubernetes_runtime import Recorder

pytestmark = [
    pytest.mark.testbed,
    pytest.mark.testbed_tool("kueue"),
    pytest.mark.testbed_tool("mpi-operator"),
]

INSTANCE = f"kq-{uuid.uuid4().hex[:8]}"
Predicate = Callable[[RunEvent], bool]


class Events(Recorder):
    """The runtime's events as the service reads them (:class:`Recorder`); a wait allows 90 s,
    as Kueue's admission on a loaded machine takes longer than a pod's start."""

    def wait(self, uid: str, predicate: Predicate, timeout: float = 90, what: str = "") -> RunEvent:
        return super().wait(uid, predicate, timeout, what)


@pytest.fixture(scope="module")
def settings() -> Iterator[Settings]:
    """Defaults only: no developer config file or RUNPLANE_* variable leaks in."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("RUNPLANE_") and name != "RUNPLANE_SKIP_TESTBED":
                patch.delenv(name)
        patch.setenv("RUNPLANE_CONFIG", os.devnull)
        yield Settings(namespace=topology.RUNS_NAMESPACE, kueue="on")


@pytest.fixture(scope="module")
def kueue(testbed_cluster: TestbedCluster) -> Iterator[tb_kueue.Kueue]:
    # served before Kueue starts, so that its MPIJob webhook answers from the first
    mpi_operator.install_crd(testbed_cluster.api)
    with tb_kueue.running(testbed_cluster.cluster) as started:
        yield started


@pytest.fixture(scope="module")
def runtime(
    testbed_cluster: TestbedCluster, kueue: tb_kueue.Kueue, settings: Settings
) -> Iterator[tuple[KubernetesRuntime, Events]]:
    rt = KubernetesRuntime(
        settings, api=testbed_cluster.api, instance=INSTANCE, grace_period_seconds=0
    )
    assert rt.kueue is not None, "the runtime must find Kueue's CRDs"
    events = Events()
    reader = events.read(rt)
    assert rt.watch.wait_synced(30)
    yield rt, events
    # Kueue still runs: it lifts its finalizers from the pods as they go
    core = testbed_cluster.core
    selector = f"{names.INSTANCE}={INSTANCE}"
    core.delete_collection_namespaced_pod(testbed_cluster.namespace, label_selector=selector)
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod(testbed_cluster.namespace, label_selector=selector).items:
        assert time.monotonic() < deadline, "the module's pods were not deleted"
        time.sleep(0.2)
    rt.close()
    reader.join(10)


@pytest.fixture
def projects(
    testbed_cluster: TestbedCluster, runtime: tuple[KubernetesRuntime, Events]
) -> Iterator[list[str]]:
    """The projects a test makes queues for, and its runs, removed after it: an idle quota
    left in the cohort would be lent to the next test's projects."""
    made: list[str] = []
    yield made
    rt, _ = runtime
    for uid in list(rt.existing()):
        rt.abort(uid, "Aborted", "test over")
    assert rt.kueue is not None
    nothing = {r: "0" for r in rk.RESOURCES}
    for project in made:  # lends nothing while it is being deleted
        rt.kueue.sync_project_queue(project, {f: nothing for f in rk.FLAVORS})
    objects = client.CustomObjectsApi(testbed_cluster.api)
    for project in made:
        for call in (
            lambda p=project: objects.delete_namespaced_custom_object(
                rk.GROUP, "v1beta2", testbed_cluster.namespace, "localqueues", p
            ),
            lambda p=project: objects.delete_cluster_custom_object(
                rk.GROUP,
                "v1beta2",
                "clusterqueues",
                rk.cluster_queue_name(testbed_cluster.namespace, p),
            ),
        ):
            try:
                call()
            except ApiException as error:
                if error.status != 404:
                    raise


def _job(
    project: str, name: str, mode: str, cpu: str, priority: str = "medium"
) -> runplane.Function:
    fn = runplane.new_function(name, project=project, image="registry.example/job:1")
    fn.with_requests(cpu=cpu, mem="256Mi").with_limits(cpu=cpu, mem="256Mi")
    return fn.with_preemption_mode(mode).with_priority_class(priority)


def _launch(rt: KubernetesRuntime, settings: Settings, fn: runplane.Function) -> str:
    uid = uuid.uuid4().hex
    if fn.kind == "mpijob":
        request = build_request(fn, settings, uid=uid)
    else:  # kwok runs no code: the call is empty
        out = render(fn, settings, run=RunRef(uid, 1))
        invocation = Invocation(
            uid=uid,
            attempt=1,
            project=fn.metadata.project,
            function=fn.metadata.name,
            handler="handler",
            code="",
            filename="job.py",
        )
        request = RunRequest(invocation, out.manifests, out.resources, submitted=time.time())
    rt.check(request)
    rt.launch(request)
    return uid


def _workload_of(tb: TestbedCluster, owner_uid: str, timeout: float = 60) -> dict[str, Any]:
    """The Workload Kueue made for the object of ``owner_uid``."""
    objects = client.CustomObjectsApi(tb.api)
    deadline = time.monotonic() + timeout
    while True:
        listed = objects.list_namespaced_custom_object(
            rk.GROUP, "v1beta2", tb.namespace, "workloads"
        )
        for workload in listed["items"]:
            owners = workload["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == owner_uid for o in owners):
                return dict(workload)
        assert time.monotonic() < deadline, f"no Workload for {owner_uid}"
        time.sleep(0.2)


def _pod_of(tb: TestbedCluster, uid: str) -> client.V1Pod:
    deadline = time.monotonic() + 60
    while True:
        pods = tb.core.list_namespaced_pod(tb.namespace, label_selector=f"{names.RUN_UID}={uid}")
        if pods.items:
            return pods.items[0]
        assert time.monotonic() < deadline, f"no pod for run {uid}"
        time.sleep(0.2)


def _group(tb: TestbedCluster, node: str) -> str:
    meta = tb.core.read_node(node).metadata
    return ((meta.labels if meta else None) or {}).get(topology.GROUP_LABEL, "")


def _running(events: Events, uid: str) -> RunEvent:
    return events.wait(uid, lambda e: e.state is RunState.RUNNING, what="running")


@pytest.mark.parametrize(
    ("mode", "flavor", "group"),
    [
        ("prevent", "on-demand", "on-demand"),
        ("constrain", "spot", "spot"),
        ("allow", "spot", "spot"),
    ],
)
def test_a_mode_is_admitted_to_its_flavor_and_lands_where_that_flavor_is(
    testbed_cluster: TestbedCluster,
    runtime: tuple[KubernetesRuntime, Events],
    settings: Settings,
    projects: list[str],
    mode: str,
    flavor: str,
    group: str,
) -> None:
    rt, events = runtime
    project = f"kq-{mode}"  # a queue of its own: the last test's is deleted
    projects.append(project)
    uid = _launch(rt, settings, _job(project, f"mode-{mode}", mode, "500m"))
    running = _running(events, uid)
    assert _group(testbed_cluster, running.node) == group
    pod = _pod_of(testbed_cluster, uid)
    workload = _workload_of(testbed_cluster, pod.metadata.uid)
    assert set(tb_kueue.flavor_of(workload).values()) == {flavor}
    # Kueue put the flavor's labels in the pod's selector; the mode's affinity agrees with them
    selector = pod.spec.node_selector or {}
    assert selector[topology.LIFECYCLE_LABEL] == (
        topology.SPOT if flavor == "spot" else topology.ON_DEMAND
    )
    assert pod.metadata.labels[rk.QUEUE_LABEL] == project
    assert pod.metadata.labels[rk.PRIORITY_LABEL] == "runplane-medium"


def test_a_project_borrows_idle_quota_and_gives_it_back_when_its_owner_needs_it(
    testbed_cluster: TestbedCluster,
    runtime: tuple[KubernetesRuntime, Events],
    settings: Settings,
    projects: list[str],
) -> None:
    rt, events = runtime
    projects.extend(["kq-a", "kq-b"])
    assert rt.kueue is not None
    # as the service hands them over: the quotas an admin set, each project's ClusterQueue
    two = ProjectQuota(
        {
            "on-demand": ProjectQuota.flavor_of("on-demand", {"cpu": "2", "memory": "8Gi"}),
            "spot": ProjectQuota.flavor_of("spot", {"cpu": "0", "memory": "0"}),
        }
    )
    rt.apply_quotas({"kq-a": two, "kq-b": two})
    objects = client.CustomObjectsApi(testbed_cluster.api)
    queue = objects.get_cluster_custom_object(
        rk.GROUP,
        "v1beta2",
        "clusterqueues",
        rk.cluster_queue_name(testbed_cluster.namespace, "kq-a"),
    )
    nominal = {
        flavor["name"]: {r["name"]: r["nominalQuota"] for r in flavor["resources"]}
        for group in queue["spec"]["resourceGroups"]
        for flavor in group["flavors"]
    }
    assert nominal["on-demand"]["cpu"] == "2"
    assert nominal["spot"]["memory"] == "0"
    # kq-a runs three 1-CPU runs on its 2 CPUs: the third borrows kq-b's idle one
    a_runs = [_launch(rt, settings, _job("kq-a", f"a{i}", "prevent", "1")) for i in range(3)]
    for uid in a_runs:
        _running(events, uid)
    # a fourth, of 2 CPUs, waits for quota (5 > 2 + 2), in Kueue's words, not for a node
    waiting = _launch(rt, settings, _job("kq-a", "a3", "prevent", "2"))
    said = events.wait(
        waiting, lambda e: e.reason == rk.WAITING_FOR_QUOTA and "needs" in e.message, what="told"
    )
    assert said.state is RunState.PENDING
    assert said.condition == Condition.PENDING_NOT_SCHEDULED
    assert said.message.startswith("waiting for quota: project kq-a needs")
    assert "on-demand" in said.message
    # kq-b wants its two CPUs: Kueue reclaims the one kq-a borrowed
    b_runs = [_launch(rt, settings, _job("kq-b", f"b{i}", "prevent", "1")) for i in range(2)]
    for uid in b_runs:
        _running(events, uid)
    preempted = [uid for uid in a_runs if any(e.reason == Reason.PREEMPTED for e in events.of(uid))]
    assert len(preempted) == 1, [events.of(uid) for uid in a_runs]
    ended = next(e for e in events.of(preempted[0]) if e.reason == Reason.PREEMPTED)
    assert ended.state is RunState.ERROR
    assert ended.message.startswith("WorkloadEvictedDueTo")


def test_a_high_priority_run_preempts_a_low_one_within_its_quota(
    runtime: tuple[KubernetesRuntime, Events], settings: Settings, projects: list[str]
) -> None:
    rt, events = runtime
    projects.append("kq-prio")
    assert rt.kueue is not None
    rt.kueue.sync_project_queue(
        "kq-prio", {"on-demand": {"cpu": "2", "memory": "8Gi"}, "spot": {"cpu": "0", "memory": "0"}}
    )
    low = [
        _launch(rt, settings, _job("kq-prio", f"low{i}", "prevent", "1", "low")) for i in range(2)
    ]
    for uid in low:
        _running(events, uid)
    high = _launch(rt, settings, _job("kq-prio", "high", "prevent", "1", "high"))
    _running(events, high)
    preempted = [uid for uid in low if any(e.reason == Reason.PREEMPTED for e in events.of(uid))]
    assert len(preempted) == 1
    ended = next(e for e in events.of(preempted[0]) if e.reason == Reason.PREEMPTED)
    assert "Preempted" in ended.message


def _trainer(tmp_path: Path, project: str) -> runplane.Function:
    code = tmp_path / "train.py"
    code.write_text("def train(context):\n    return 1\n")
    fn = runplane.code_to_function(
        "trainer", project=project, filename=str(code), kind="mpijob", handler="train"
    )
    fn.spec.replicas = 2
    fn.with_requests(cpu="1500m", mem="1Gi").with_limits(cpu="1500m", mem="1Gi")
    return fn.with_preemption_mode("prevent")


def test_an_mpijob_waits_whole_for_quota_and_starts_whole_when_it_frees(
    testbed_cluster: TestbedCluster,
    runtime: tuple[KubernetesRuntime, Events],
    settings: Settings,
    projects: list[str],
    tmp_path: Path,
) -> None:
    rt, events = runtime
    tb = testbed_cluster
    projects.append("kq-mpi")
    assert rt.kueue is not None
    rt.kueue.sync_project_queue(
        "kq-mpi", {"on-demand": {"cpu": "4", "memory": "16Gi"}, "spot": {"cpu": "0", "memory": "0"}}
    )
    with mpi_operator.running(tb, tb.namespace, "kueue") as operator:
        blocker = _launch(rt, settings, _job("kq-mpi", "blocker", "prevent", "3"))
        _running(events, blocker)
        uid = _launch(rt, settings, _trainer(tmp_path, "kq-mpi"))
        said = events.wait(
            uid, lambda e: e.reason == rk.WAITING_FOR_QUOTA and "needs" in e.message, what="told"
        )
        assert said.state is RunState.PENDING
        assert "project kq-mpi needs" in said.message
        # whole-pending: suspended, not one of its pods made
        objects = client.CustomObjectsApi(tb.api)
        name = f"trainer-{uid[:16]}-1"
        job = objects.get_namespaced_custom_object(
            "kubeflow.org", "v2beta1", tb.namespace, "mpijobs", name
        )
        assert job["spec"]["runPolicy"]["suspend"] is True
        assert not tb.core.list_namespaced_pod(
            tb.namespace, label_selector=f"{names.RUN_UID}={uid}"
        ).items
        operator.check()
        # the blocker ends: the MPIJob is admitted whole, both workers made together
        assert rt.abort(blocker, "Aborted", "room for the MPIJob")
        deadline = time.monotonic() + 120
        while True:
            pods = tb.core.list_namespaced_pod(
                tb.namespace, label_selector=f"{names.RUN_UID}={uid}"
            ).items
            workers = [p for p in pods if "worker" in (p.metadata.name or "")]
            if len(workers) == 2 and all(kube.node_name(p) for p in workers):
                break
            operator.check()
            assert time.monotonic() < deadline, [p.metadata.name for p in pods]
            time.sleep(0.5)
        workload = _workload_of(tb, job["metadata"]["uid"])
        assert rk.waiting(workload) is None
        assert set(tb_kueue.flavor_of(workload).values()) == {"on-demand"}
        assert rt.abort(uid, "Aborted", "done")


def _cluster_queue(tb: TestbedCluster, project: str) -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(tb.api).get_cluster_custom_object(
            rk.GROUP, "v1beta2", "clusterqueues", rk.cluster_queue_name(tb.namespace, project)
        )
    )


def _filled_queue(
    rt: KubernetesRuntime,
    events: Events,
    settings: Settings,
    project: str,
    priority: str = "medium",
) -> None:
    """``project``'s queue with 1 CPU on on-demand, none to borrow, taken by a running run."""
    assert rt.kueue is not None
    rt.kueue.sync_project_queue(
        project,
        {
            "on-demand": {"cpu": {"nominalQuota": "1", "borrowingLimit": "0"}, "memory": "8Gi"},
            "spot": {"cpu": "0", "memory": "0"},
        },
    )
    blocker = _launch(rt, settings, _job(project, "blocker", "prevent", "1", priority))
    _running(events, blocker)


def _told(events: Events, uid: str) -> RunEvent:
    """The run's first word from Kueue on what it lacks."""
    return events.wait(
        uid, lambda e: e.reason == rk.WAITING_FOR_QUOTA and "needs" in e.message, what="told"
    )


def test_a_project_that_may_not_borrow_waits_beside_idle_quota(
    testbed_cluster: TestbedCluster,
    runtime: tuple[KubernetesRuntime, Events],
    settings: Settings,
    projects: list[str],
) -> None:
    rt, events = runtime
    projects.extend(["kq-nb", "kq-idle"])
    none = ProjectQuota.flavor_of("spot", {"cpu": "0", "memory": "0"})
    rt.apply_quotas(
        {
            "kq-nb": ProjectQuota(
                {
                    "on-demand": ProjectQuota.flavor_of(
                        "on-demand",
                        {"cpu": {"nominal": "2", "borrowing_limit": "0"}, "memory": "8Gi"},
                    ),
                    "spot": none,
                }
            ),
            # 4 idle CPUs in the cohort, lent to any project that may borrow
            "kq-idle": ProjectQuota(
                {
                    "on-demand": ProjectQuota.flavor_of(
                        "on-demand",
                        {"cpu": {"nominal": "4", "lending_limit": "4"}, "memory": "8Gi"},
                    ),
                    "spot": none,
                }
            ),
        }
    )
    resources = {
        flavor["name"]: {r["name"]: r for r in flavor["resources"]}
        for group in _cluster_queue(testbed_cluster, "kq-nb")["spec"]["resourceGroups"]
        for flavor in group["flavors"]
    }
    assert resources["on-demand"]["cpu"]["borrowingLimit"] == "0"
    idle = _cluster_queue(testbed_cluster, "kq-idle")["spec"]["resourceGroups"][0]["flavors"]
    assert {r["name"]: r.get("lendingLimit") for r in idle[1]["resources"]}["cpu"] == "4"
    runs = [_launch(rt, settings, _job("kq-nb", f"nb{i}", "prevent", "1")) for i in range(2)]
    for uid in runs:
        _running(events, uid)
    # a third CPU would be borrowed from kq-idle's four; a borrowing limit of 0 keeps it waiting
    third = _launch(rt, settings, _job("kq-nb", "nb2", "prevent", "1"))
    said = _told(events, third)
    assert said.message.startswith("waiting for quota: project kq-nb needs 1 CPU more on on-demand")
    pod = _pod_of(testbed_cluster, third)
    workload = _workload_of(testbed_cluster, pod.metadata.uid)
    assert rk.waiting(workload) is not None, "admitted by borrowing beyond the limit"
    assert not any(e.state is RunState.RUNNING for e in events.of(third))


def test_a_waiting_run_says_how_many_runs_are_ahead_of_it_in_kueues_order(
    testbed_cluster: TestbedCluster,
    runtime: tuple[KubernetesRuntime, Events],
    settings: Settings,
    projects: list[str],
) -> None:
    rt, events = runtime
    projects.append("kq-ahead")
    _filled_queue(rt, events, settings, "kq-ahead", "high")
    # Kueue's order: a higher priority first, then the earlier queued; each told on arrival
    said, workloads, uids = {}, {}, {}
    for name, priority in (
        ("high", "high"),
        ("medium", "medium"),
        ("low", "low"),
        ("m2", "medium"),
    ):
        uid = uids[name] = _launch(
            rt, settings, _job("kq-ahead", f"w-{name}", "prevent", "1", priority)
        )
        said[name] = _told(events, uid).message
        workloads[name] = _workload_of(testbed_cluster, _pod_of(testbed_cluster, uid).metadata.uid)
    assert said["high"].endswith("; no run ahead of it"), said
    assert said["medium"].endswith("; 1 run ahead of it"), said
    assert said["low"].endswith("; 2 runs ahead of it"), said
    # m2 comes after high, and after medium unless queued in the same second with a lower uid
    # (Kueue's tie-break; timestamps are whole seconds): never after low
    first, second = (
        (w["metadata"]["creationTimestamp"], w["metadata"]["uid"])
        for w in (workloads["medium"], workloads["m2"])
    )
    ahead = 2 if first < second else 1
    assert said["m2"].endswith(
        f"; {ahead} runs ahead of it" if ahead == 2 else "; 1 run ahead of it"
    )
    for message in said.values():
        assert message.startswith("waiting for quota: project kq-ahead needs 1 CPU more")
    # Kueue does not change a workload when others move ahead of it or leave; its count
    # follows all the same: m2 came in ahead of low, then the first in the queue goes
    _ends(events, uids["low"], "; 3 runs ahead of it")
    rt.abort(uids["high"], "Aborted", "no longer wanted")
    front, behind = ("medium", "m2") if ahead == 2 else ("m2", "medium")
    _ends(events, uids[front], "; no run ahead of it")
    _ends(events, uids[behind], "; 1 run ahead of it")
    _ends(events, uids["low"], "; 2 runs ahead of it")


def _ends(events: Events, uid: str, words: str) -> None:
    """Wait until the run's last word ends with ``words``."""
    events.wait(uid, lambda _: events.of(uid)[-1].message.endswith(words), what=words)


def test_the_admission_benchmark_in_short_goes_through_kueue_and_around_it(
    testbed_cluster: TestbedCluster, kueue: tb_kueue.Kueue, settings: Settings
) -> None:
    """bench/kueue_admission.py's measure, small: every run reaches Running both ways, and
    with Kueue each pod went through Kueue's webhook and the runtime heard of its Workload.
    Its times are not asserted."""
    without = kueue_admission.phase(testbed_cluster.api, 40, 2, "off", {})
    with_kueue = kueue_admission.phase(
        testbed_cluster.api, 40, 2, "on", {"kueue": kueue.process.pid}
    )
    assert without["all_running"], without
    assert with_kueue["all_running"], with_kueue
    assert "webhook mpod.kb.io CREATE" not in without["api_requests_per_run"]
    assert with_kueue["api_requests_per_run"]["webhook mpod.kb.io CREATE"] >= 1
    assert with_kueue["workload_watch_events_per_run"] >= 1


def test_a_run_whose_pod_the_pod_watch_has_not_read_is_told_why_it_waits(
    testbed_cluster: TestbedCluster,
    runtime: tuple[KubernetesRuntime, Events],
    settings: Settings,
    projects: list[str],
) -> None:
    """Kueue says why a workload waits as soon as it looks at it, and may say nothing more for
    a long time; the pod watch reads a busy stream at its pace, and may not have read the pod
    by then (here: it knows none). The pod is read from the API server, and the run is told."""
    rt, events = runtime
    projects.append("kq-unread")
    _filled_queue(rt, events, settings, "kq-unread")
    assert rt.kueue is not None
    known = rt.kueue._pod_of
    rt.kueue._pod_of = lambda uid: None
    try:
        waiting = _launch(rt, settings, _job("kq-unread", "unread", "prevent", "1"))
        said = _told(events, waiting)
    finally:
        rt.kueue._pod_of = known
    assert said.message.startswith("waiting for quota: project kq-unread needs 1 CPU more")

"""The Kubernetes runtime against the real control plane: rendered functions are launched,
the real scheduler places them, kwok plays the kubelet, and every outcome comes back as a
RunEvent through the runtime's own watch."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

import runplane
from runplane import meters, names
from runplane.bootstrap import Invocation
from runplane.config import Settings
from runplane.errors import ConflictError
from runplane.rendering import RunRef, render
from runplane.runs import RunState
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes import KubernetesRuntime, PodWatch
from runplane.runtimes.kubernetes.api.rest import RestApi
from runplane.spec.function import Function
from testbed import cluster as tb_cluster
from testbed import kube, topology
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed

INSTANCE = f"krt-{uuid.uuid4().hex[:8]}"
IMAGE = "registry.example/runplane/job:1"
MakePod = Callable[..., str]
Predicate = Callable[[RunEvent], bool]


class Recorder:
    """Reads the runtime's events (as the service does), keeps them, lets a test wait for one."""

    def __init__(self) -> None:
        self.events: list[RunEvent] = []
        self._changed = threading.Condition()

    def read(self, runtime: KubernetesRuntime) -> threading.Thread:
        async def consume() -> None:
            async for event in runtime.events():
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()

        reader = threading.Thread(target=lambda: asyncio.run(consume()), daemon=True)
        reader.start()
        return reader

    def of(self, uid: str) -> list[RunEvent]:
        with self._changed:
            return [e for e in self.events if e.uid == uid]

    def wait(self, uid: str, predicate: Predicate, timeout: float = 30, what: str = "") -> RunEvent:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for event in self.events:
                    if event.uid == uid and predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
        seen = [(e.state.value, e.condition, e.reason, e.message) for e in self.of(uid)]
        raise AssertionError(f"run {uid} never {what or predicate}; events: {seen}")


def state(wanted: RunState) -> Predicate:
    return lambda event: event.state is wanted


@pytest.fixture(scope="module")
def settings() -> Iterator[Settings]:
    """Defaults only: no developer config file or RUNPLANE_* variable leaks into placement."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("RUNPLANE_") and name != "RUNPLANE_SKIP_TESTBED":
                patch.delenv(name)
        patch.setenv("RUNPLANE_CONFIG", os.devnull)
        yield Settings(namespace=topology.RUNS_NAMESPACE)


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def runtime(
    testbed_cluster: TestbedCluster, settings: Settings, recorder: Recorder
) -> Iterator[KubernetesRuntime]:
    rt = KubernetesRuntime(
        settings, api=testbed_cluster.api, instance=INSTANCE, grace_period_seconds=5
    )
    reader = recorder.read(rt)
    assert rt.watch.wait_synced(10), "the runtime's watch never listed the namespace"
    yield rt
    rt.close()
    reader.join(10)
    assert not rt.watch.running
    assert not reader.is_alive(), "the event stream must end with close()"


def new_uid() -> str:
    return uuid.uuid4().hex


def job(name: str, **requests: Any) -> Function:
    return runplane.new_function(name, image=IMAGE).with_requests(**(requests or {"cpu": "100m"}))


def request(
    fn: Function,
    settings: Settings,
    uid: str,
    attempt: int = 1,
    annotations: dict[str, str] | None = None,
) -> RunRequest:
    """A run of ``fn`` as the runtime gets it; kwok runs no code, so the call is empty."""
    out = render(fn, settings, run=RunRef(uid, attempt))
    if annotations:
        out.manifests[0]["metadata"]["annotations"] = dict(annotations)
    invocation = Invocation(
        uid=uid,
        attempt=attempt,
        project=fn.metadata.project,
        function=fn.metadata.name,
        handler="handler",
        code="",
        filename="job.py",
    )
    return RunRequest(invocation, out.manifests, out.resources, submitted=time.time())


def pod_names(tb: TestbedCluster, uid: str) -> list[str]:
    """The run's pods as the API server has them now."""
    pods = tb.core.list_namespaced_pod(tb.namespace, label_selector=f"{names.RUN_UID}={uid}")
    return sorted(p.metadata.name for p in pods.items if p.metadata)


def wait_gone(tb: TestbedCluster, uid: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while pod_names(tb, uid):
        assert time.monotonic() < deadline, f"pods of run {uid} still exist"
        time.sleep(0.1)


def group_of(tb: TestbedCluster, node: str) -> str:
    meta = tb.core.read_node(node).metadata
    return ((meta.labels if meta else None) or {}).get(topology.GROUP_LABEL, "")


def on_spot_node(name: str, node: str) -> Function:
    """A job that tolerates spot nodes, placed on ``node``."""
    return (
        job(name)
        .with_preemption_mode("constrain")
        .with_node_selection(node_selector={"kubernetes.io/hostname": node})
    )


@pytest.fixture(scope="module", autouse=True)
def lost_spot_run(
    testbed_cluster: TestbedCluster, runtime: KubernetesRuntime, settings: Settings
) -> Iterator[str]:
    """A run on a spot node that is deleted at module start: the runtime's node watch reports
    it lost at once (the cluster's PodGC would collect its pod only after a 40 s quarantine)."""
    tb = testbed_cluster
    node = tb.add_node("spot", "krt-spot-lost")
    uid = new_uid()
    runtime.launch(request(on_spot_node("lost", node), settings, uid))
    pod = tb.wait_pod(f"lost-{uid[:16]}-1", lambda p: kube.pod_status(p).phase == "Running")
    assert kube.node_name(pod) == node
    tb.delete_node(node)
    yield uid
    tb.core.delete_collection_namespaced_pod(
        tb.namespace, label_selector=f"{names.RUN_UID}={uid}", grace_period_seconds=0
    )


@pytest.fixture(autouse=True)
def clean_runs(
    testbed_cluster: TestbedCluster, runtime: KubernetesRuntime, lost_spot_run: str
) -> Iterator[None]:
    """Each test leaves empty nodes behind (all but the run whose node is being collected)."""
    yield
    selector = f"{names.INSTANCE}={INSTANCE},{names.RUN_UID}!={lost_spot_run}"
    core = testbed_cluster.core
    core.delete_collection_namespaced_pod(
        testbed_cluster.namespace, label_selector=selector, grace_period_seconds=0
    )
    deadline = time.monotonic() + 30
    while core.list_namespaced_pod(testbed_cluster.namespace, label_selector=selector).items:
        assert time.monotonic() < deadline, "pods of the test were not deleted"
        time.sleep(0.1)


# -- placement ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "groups"),
    [
        ("prevent", {"on-demand"}),
        ("none", {"on-demand"}),
        ("constrain", {"spot"}),
        ("allow", {"on-demand", "spot"}),
    ],
)
def test_preemption_mode_lands_on_expected_group(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    settings: Settings,
    mode: str,
    groups: set[str],
) -> None:
    uids = [new_uid() for _ in range(3)]
    for uid in uids:
        runtime.launch(request(job(f"mode-{mode}").with_preemption_mode(mode), settings, uid))
    for uid in uids:
        running = recorder.wait(uid, state(RunState.RUNNING), what="running")
        assert running.condition == "running"
        assert running.node
        assert group_of(testbed_cluster, running.node) in groups
        pending = [e for e in recorder.of(uid) if e.state is RunState.PENDING]
        assert pending
        assert pending[0].condition == "pending_not_scheduled"


def test_impossible_request_reports_the_scheduler_message(
    runtime: KubernetesRuntime, recorder: Recorder, settings: Settings
) -> None:
    uid = new_uid()
    runtime.launch(request(job("huge", cpu=1000), settings, uid))
    event = recorder.wait(uid, lambda e: e.reason == "Unschedulable", what="Unschedulable")
    assert (event.state, event.condition) == (RunState.PENDING, "pending_not_scheduled")
    assert event.message.startswith("0/")
    assert "Insufficient cpu" in event.message
    assert not event.node


def test_image_pull_backoff(
    runtime: KubernetesRuntime, recorder: Recorder, settings: Settings
) -> None:
    uid = new_uid()
    fn = runplane.new_function("bad-image", image="registry.example/does-not-exist:1")
    runtime.launch(request(fn, settings, uid))
    event = recorder.wait(uid, lambda e: e.condition == "image_pull_backoff", what="backing off")
    assert (event.state, event.reason) == (RunState.PENDING, "ImagePullBackOff")
    assert "registry.example/does-not-exist:1" in event.message
    assert event.node


# -- ends ---------------------------------------------------------------------------------


def test_stage_driven_run_completes(
    runtime: KubernetesRuntime, recorder: Recorder, settings: Settings
) -> None:
    uid = new_uid()
    runtime.launch(
        request(job("short"), settings, uid, annotations={"runplane.io/test-duration": "2s"})
    )
    done = recorder.wait(uid, state(RunState.COMPLETED), what="completed")
    assert (done.reason, done.exit_code) == ("Completed", 0)
    states = [e.state for e in recorder.of(uid)]
    assert states.index(RunState.RUNNING) < states.index(RunState.COMPLETED)
    assert states.count(RunState.COMPLETED) == 1


def test_oom_killed_run(runtime: KubernetesRuntime, recorder: Recorder, settings: Settings) -> None:
    uid = new_uid()
    notes = {
        "runplane.io/test-duration": "1s",
        "runplane.io/test-exit-code": "137",
        "runplane.io/test-reason": "OOMKilled",
    }
    runtime.launch(request(job("oom"), settings, uid, annotations=notes))
    event = recorder.wait(uid, state(RunState.ERROR), what="error")
    assert (event.reason, event.exit_code) == ("OOMKilled", 137)


def test_system_pod_preempts_a_run(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    settings: Settings,
    make_pod: MakePod,
) -> None:
    tb = testbed_cluster
    group = tb.topology.group("on-demand")
    node = tb.add_node("on-demand", "krt-preempt")
    try:
        uid = new_uid()
        fn = job("victim", cpu=group.allocatable_cpu).with_node_selection(
            node_selector={"kubernetes.io/hostname": node}
        )
        runtime.launch(request(fn, settings, uid))
        recorder.wait(uid, state(RunState.RUNNING), what="running")
        make_pod(
            "krt-core-service",
            cpu=group.allocatable_cpu,
            priorityClassName=topology.SYSTEM_PRIORITY_CLASS,
            nodeSelector={"kubernetes.io/hostname": node},
        )
        event = recorder.wait(uid, state(RunState.ERROR), what="error")
        assert event.reason == "Preempted"
        assert event.message.startswith("PreemptionByScheduler")
        assert event.node == node
        # The pod's Failed and DELETED observations follow; once a later run's first event has
        # come through the same watch, they have been seen too. Neither is a second end.
        wait_gone(tb, uid)
        barrier = new_uid()
        runtime.launch(request(job("barrier"), settings, barrier))
        recorder.wait(barrier, lambda e: True, what="reported")
        assert [e.state for e in recorder.of(uid)].count(RunState.ERROR) == 1
    finally:
        tb.delete_node(node)


def test_abort_deletes_the_pod_and_reports_aborted(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    settings: Settings,
) -> None:
    uid = new_uid()
    runtime.launch(request(job("long"), settings, uid))
    recorder.wait(uid, state(RunState.RUNNING), what="running")
    assert runtime.existing()[uid] == pod_names(testbed_cluster, uid)
    assert runtime.abort(uid, "ThresholdExceeded", "running for too long")
    aborting = recorder.wait(uid, state(RunState.ABORTING), what="aborting")
    aborted = recorder.wait(uid, state(RunState.ABORTED), what="aborted")
    assert (aborting.reason, aborted.reason) == ("ThresholdExceeded", "ThresholdExceeded")
    assert aborted.message == "running for too long"
    assert not any(e.state is RunState.ERROR for e in recorder.of(uid))
    wait_gone(testbed_cluster, uid)
    assert not runtime.abort(uid, "Aborted", ""), "nothing left to abort"


def requests_sent() -> dict[tuple[str, meters.Labels], int]:
    return {key: n for key, n in meters.counts().items() if key[0] == "kube_requests"}


def test_an_abort_decided_is_reported_before_any_request_carries_it_out(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    settings: Settings,
) -> None:
    # The monitor reports a breach aborting as it decides it (from the synced watch, asking
    # nothing), then an abort thread carries it out: the report comes once.
    uid = new_uid()
    runtime.launch(request(job("never-fits", cpu=1000), settings, uid))
    recorder.wait(uid, lambda e: e.reason == "Unschedulable", what="Unschedulable")
    before = requests_sent()
    runtime.aborting(uid, "ThresholdExceeded", "pending for too long")
    aborting = recorder.wait(uid, state(RunState.ABORTING), timeout=5, what="aborting")
    assert (aborting.reason, aborting.message) == ("ThresholdExceeded", "pending for too long")
    assert requests_sent() == before  # no request: the pod as the watch knows it
    assert pod_names(testbed_cluster, uid), "reported, not yet carried out"
    assert runtime.abort(uid, "ThresholdExceeded", "pending for too long")
    recorder.wait(uid, state(RunState.ABORTED), what="aborted")
    assert [e.state for e in recorder.of(uid)].count(RunState.ABORTING) == 1
    wait_gone(testbed_cluster, uid)
    runtime.aborting(uid, "ThresholdExceeded", "again")  # nothing left: nothing reported
    assert [e.state for e in recorder.of(uid)].count(RunState.ABORTING) == 1


def test_abort_of_a_pending_run(
    runtime: KubernetesRuntime, recorder: Recorder, settings: Settings
) -> None:
    uid = new_uid()
    runtime.launch(request(job("never-fits", cpu=1000), settings, uid))
    recorder.wait(uid, lambda e: e.reason == "Unschedulable", what="Unschedulable")
    assert runtime.abort(uid, "Aborted", "by the test")
    recorder.wait(uid, state(RunState.ABORTED), what="aborted")


def test_someone_else_deleting_the_pod_is_an_error(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    settings: Settings,
) -> None:
    uid = new_uid()
    run = request(job("deleted"), settings, uid)
    runtime.launch(run)
    recorder.wait(uid, state(RunState.RUNNING), what="running")
    testbed_cluster.core.delete_namespaced_pod(
        run.pod["metadata"]["name"], testbed_cluster.namespace
    )
    event = recorder.wait(uid, state(RunState.ERROR), what="error")
    assert event.reason == "PodDeleted"


# -- idempotency --------------------------------------------------------------------------


def test_launching_the_same_attempt_twice_makes_one_pod(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    settings: Settings,
) -> None:
    uid = new_uid()
    run = request(job("twice"), settings, uid)
    failures: list[BaseException] = []

    def launch() -> None:
        try:
            runtime.launch(run)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=launch) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    runtime.launch(run)
    assert failures == []
    assert pod_names(testbed_cluster, uid) == [f"twice-{uid[:16]}-1"]
    recorder.wait(uid, state(RunState.RUNNING), what="running")
    runtime.launch(request(job("twice"), settings, uid, attempt=2))
    assert pod_names(testbed_cluster, uid) == [f"twice-{uid[:16]}-1", f"twice-{uid[:16]}-2"]


def test_a_foreign_pod_with_the_same_name_is_a_conflict(
    runtime: KubernetesRuntime, settings: Settings, make_pod: MakePod
) -> None:
    uid = new_uid()
    make_pod(f"clash-{uid[:16]}-1")
    with pytest.raises(ConflictError, match="already exists"):
        runtime.launch(request(job("clash"), settings, uid))


def test_secrets_are_created_refreshed_and_never_taken_over(
    testbed_cluster: TestbedCluster, runtime: KubernetesRuntime, settings: Settings
) -> None:
    core = testbed_cluster.core
    ns = testbed_cluster.namespace
    secret = f"krt-creds-{uuid.uuid4().hex[:6]}"
    try:
        for value in ("one", "two"):
            fn = job("with-secret")
            fn.hold_secret(secret, {"token": value})
            runtime.launch(request(fn, settings, new_uid()))
            data = core.read_namespaced_secret(secret, ns).data or {}
            assert base64.b64decode(data["token"]).decode() == value
        other = job("other-function")
        other.hold_secret(secret, {"token": "stolen"})
        with pytest.raises(ConflictError, match="will not overwrite"):
            runtime.launch(request(other, settings, new_uid()))
    finally:
        core.delete_namespaced_secret(secret, ns)


# -- the watch ----------------------------------------------------------------------------


def test_watch_resumes_after_a_disconnect_without_relisting(
    runtime: KubernetesRuntime, recorder: Recorder, settings: Settings
) -> None:
    lists, watches = runtime.watch.stats.lists, runtime.watch.stats.watches
    runtime.watch.interrupt()
    uid = new_uid()
    runtime.launch(request(job("after-drop"), settings, uid))
    recorder.wait(uid, state(RunState.RUNNING), what="running")
    assert runtime.watch.stats.watches > watches
    assert runtime.watch.stats.lists == lists, "a dropped connection must resume, not re-list"


@pytest.fixture(scope="module")
def uncached_cluster() -> Iterator[tb_cluster.Cluster]:
    """A bare second control plane whose apiserver serves watches from etcd (no watch cache),
    so compacting etcd really expires old resourceVersions: the 410 a long disconnect gets."""
    settings = tb_cluster.Settings(extra_args={"kube-apiserver": ["--watch-cache=false"]})
    cluster = tb_cluster.start(settings=settings, allow_build=False)
    yield cluster
    cluster.stop()


def compact_etcd(cluster: tb_cluster.Cluster) -> int:
    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{cluster.ports['etcd']}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    key = base64.b64encode(b"/").decode()
    revision = int(post("/v3/kv/range", {"key": key, "limit": 1})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def test_watch_survives_410_gone(uncached_cluster: tb_cluster.Cluster) -> None:
    api = kube.api_client(uncached_cluster.kubeconfig)
    core = client.CoreV1Api(api)
    namespace = "default"

    def create(name: str) -> None:
        body: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {names.RUN_UID: name}},
            "spec": {"containers": [{"name": "main", "image": IMAGE}]},
        }
        core.create_namespaced_pod(namespace, body)

    before = core.list_namespaced_pod(namespace).metadata
    assert before is not None
    assert before.resource_version
    create("made-in-the-gap-1")
    create("made-in-the-gap-2")
    compact_etcd(uncached_cluster)

    seen: list[tuple[str, str]] = []
    arrived = threading.Condition()

    def handler(kind: str, pod: dict[str, Any]) -> None:
        with arrived:
            seen.append((kind, pod["metadata"]["name"]))
            arrived.notify_all()

    def wait_for(name: str) -> None:
        with arrived:
            assert arrived.wait_for(lambda: any(n == name for _, n in seen), timeout=15), seen

    watch = PodWatch(
        RestApi(api), namespace, names.RUN_UID, handler, resource_version=before.resource_version
    )
    watch.start()
    try:
        wait_for("made-in-the-gap-2")
        assert watch.stats.expired == 1
        assert watch.stats.lists == 1
        assert ("ADDED", "made-in-the-gap-1") in seen
        create("made-after")
        wait_for("made-after")
        assert watch.stats.lists == 1, "after the re-list the watch goes on from its version"
    finally:
        began = time.monotonic()
        watch.stop()
        assert not watch.running
        assert time.monotonic() - began < 3


# -- node loss (last: its clock started at module setup) ----------------------------------


def test_deleted_spot_node_reports_the_run_lost_at_once(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    lost_spot_run: str,
) -> None:
    event = recorder.wait(lost_spot_run, state(RunState.ERROR), timeout=30, what="error")
    assert event.reason == "NodeLost"
    assert event.message.startswith("node krt-spot-lost was deleted while the run was on it")
    assert event.node == "krt-spot-lost"
    assert (event.node_group, event.spot) == ("spot", True)
    wait_gone(testbed_cluster, lost_spot_run)  # nothing runs it: deleted without waiting


def test_a_pod_whose_binding_the_watch_has_not_read_is_lost_with_its_node(
    testbed_cluster: TestbedCluster,
    runtime: KubernetesRuntime,
    recorder: Recorder,
    settings: Settings,
) -> None:
    """The pod watch reads late (here: while it pauses, paced at 5 s) and still knows the pod
    unbound when the node watch sees the node go: the pods on the node are listed from the API
    server, so the run is reported lost now, not when the cluster collects its pod."""
    tb = testbed_cluster
    node = tb.add_node("spot", "krt-spot-unread")
    uid = new_uid()
    paced = runtime.watch._pace
    runtime.watch._pace = 5.0
    try:
        runtime.launch(request(on_spot_node("unread", node), settings, uid))
        tb.wait_pod(f"unread-{uid[:16]}-1", lambda p: kube.pod_status(p).phase == "Running")
        tb.delete_node(node)
        event = recorder.wait(uid, state(RunState.ERROR), timeout=30, what="error")
    finally:
        runtime.watch._pace = paced
    assert event.reason == "NodeLost"
    assert event.node == node
    wait_gone(tb, uid)

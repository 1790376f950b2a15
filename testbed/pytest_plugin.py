"""Pytest fixtures for tests that need a real control plane.

``testbed_cluster`` starts one cluster per session (building binaries first if the cache is
empty) and seeds the topology. When a test fails, the cluster's pods, nodes and events are
dumped next to the component logs and the run directory is named in the summary, so a failure
can be investigated after the cluster is gone. ``real_node`` adds one real kubelet with
containerd (testbed/realnode.py) beside it, once per session. Only ``RUNPLANE_SKIP_TESTBED=1``
skips these tests; anything else that prevents the cluster or the real node from starting is an
error, never a skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import build as tb_build
from testbed import cluster as tb_cluster
from testbed import kube
from testbed import realnode as tb_realnode
from testbed import topology as tb_topology

SKIP_ENV = "RUNPLANE_SKIP_TESTBED"
TEST_LABEL = "runplane.io/test"

PodPredicate = Callable[[client.V1Pod], bool]


def skip_requested() -> bool:
    return os.environ.get(SKIP_ENV) == "1"


_SCHEDULER_SAMPLE = re.compile(r"^(scheduler_\w+)\{([^}]*)\} ([0-9.e+-]+)$", re.MULTILINE)


def _scheduler_activity(metrics: str) -> tuple[float, bool]:
    """The scheduler's attempts so far, and whether a pod waits in its active or back-off
    queue."""
    attempts, busy = 0.0, False
    for name, labels, value in _SCHEDULER_SAMPLE.findall(metrics):
        if name == "scheduler_schedule_attempts_total":
            attempts += float(value)
        elif name == "scheduler_pending_pods" and re.search(r'queue="(active|backoff)"', labels):
            busy = busy or float(value) > 0
    return attempts, busy


@dataclass
class TestbedCluster:
    """What a test needs: where the kubeconfig is, a ready client, and the seeded topology."""

    __test__ = False  # a fixture value, not a test class, despite the name

    cluster: tb_cluster.Cluster
    api: client.ApiClient
    topology: tb_topology.Topology
    namespace: str = tb_topology.RUNS_NAMESPACE
    failures: list[str] = field(default_factory=list)

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def run_dir(self) -> Path:
        return self.cluster.run_dir

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    def read_pod(self, name: str) -> client.V1Pod:
        return self.core.read_namespaced_pod(name, self.namespace)

    def wait_scheduler_idle(self, quiet: float, timeout: float = 120) -> None:
        """Return once the scheduler has made no attempt for ``quiet`` seconds and holds no pod
        in its active or back-off queue: every pending pod is then parked as unschedulable with
        its back-off over (when ``quiet`` exceeds the longest back-off), so that freed room goes
        to the pods in priority order. No API object says when a back-off ends; the scheduler's
        metrics do."""
        deadline = time.monotonic() + timeout
        last: float | None = None
        since = time.monotonic()
        while True:
            metrics = self.cluster.scheduler_metrics()
            assert "scheduler_pending_pods{" in metrics, "the scheduler reports no queues"
            attempts, busy = _scheduler_activity(metrics)
            now = time.monotonic()
            if attempts != last or busy:
                last, since = attempts, now
            elif now - since >= quiet:
                assert attempts > 0, "the scheduler reports no attempts"
                return
            assert now < deadline, f"the scheduler was still busy after {timeout} s"
            time.sleep(0.25)

    def add_node(self, group: str, name: str) -> str:
        """One more node of a seeded group, Ready before this returns."""
        tb_topology.create_nodes(
            self.api, [tb_topology.node_manifest(self.topology.group(group), name)]
        )
        tb_topology.wait_nodes_ready(self.api, [name], timeout=60)
        return name

    def delete_node(self, name: str) -> None:
        try:
            self.core.delete_node(name)
        except ApiException as error:
            if error.status != 404:
                raise

    def wait_pod(
        self, name: str, predicate: PodPredicate, timeout: float = 30, what: str = ""
    ) -> client.V1Pod:
        """Watch rather than poll: some states (Failed just before PodGC's force delete) only
        exist for one event."""
        deadline = time.monotonic() + timeout
        last: client.V1Pod | None = None
        while True:
            pods = self.core.list_namespaced_pod(
                self.namespace, field_selector=f"metadata.name={name}"
            )
            for pod in pods.items:
                last = pod
                if predicate(pod):
                    return pod
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            since = pods.metadata.resource_version if pods.metadata else None
            selector = f"metadata.name={name}"
            timeout_s = max(1, int(remaining))
            for pod in kube.watch_pods(self.core, self.namespace, selector, since, timeout_s):
                last = pod
                if predicate(pod):
                    return pod
                if time.monotonic() > deadline:
                    break
            if time.monotonic() > deadline:
                break
        state = yaml.safe_dump(kube.plain(self.api, last)) if last else "gone"
        raise AssertionError(f"pod {name} never became {what or predicate}; last seen:\n{state}")

    def service_env(
        self,
        home: Path,
        token: str,
        *,
        namespace: str | None = None,
        secrets: list[str] | None = None,
    ) -> dict[str, str]:
        """The variables of a runplane service on this cluster: its own home, database and
        instance name, and one user token, so tests' services never share state."""
        user: dict[str, Any] = {"token": token, "user": "ci", "role": "user"}
        if secrets is not None:
            user["secrets"] = secrets
        return {
            "RUNPLANE_CONFIG": os.devnull,
            "RUNPLANE_LOCAL__HOME": str(home),
            "RUNPLANE_NAMESPACE": namespace or self.namespace,
            "RUNPLANE_SERVICE__RUNTIME": "kubernetes",
            "RUNPLANE_SERVICE__KUBECONFIG": str(self.kubeconfig),
            "RUNPLANE_SERVICE__INSTANCE": f"{home.name[:20]}-{uuid.uuid4().hex[:8]}",
            "RUNPLANE_SERVICE__DATABASE_URL": f"sqlite:///{home / 'service.db'}",
            "RUNPLANE_SERVICE__TOKENS": json.dumps([user]),
        }

    def dump(self, directory: Path) -> None:
        """Write the cluster's view of things for a post-mortem."""
        directory.mkdir(parents=True, exist_ok=True)
        dumps: dict[str, Callable[[], object]] = {
            "pods.yaml": self.core.list_pod_for_all_namespaces,
            "nodes.yaml": self.core.list_node,
            "events.yaml": self.core.list_event_for_all_namespaces,
        }
        for filename, fetch in dumps.items():
            try:
                text = yaml.safe_dump(kube.plain(self.api, fetch()), sort_keys=False)
            except Exception as err:
                text = f"# could not fetch: {err}\n"
            (directory / filename).write_text(text)


def pod_manifest(
    name: str,
    test: str,
    *,
    cpu: str = "100m",
    memory: str = "128Mi",
    extra_resources: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    image: str = "registry.example/runplane/job:1",
    **spec: Any,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra_resources or {})}
    limits = dict(extra_resources or {})
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "resources": {"requests": requests},
    }
    if limits:
        container["resources"]["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {TEST_LABEL: test}, "annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [container],
            "terminationGracePeriodSeconds": 5,
            **spec,
        },
    }


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "testbed: needs the real control-plane testbed")
    config.addinivalue_line(
        "markers",
        "testbed_tool(name): needs one of the testbed's tools (testbed/build.py's TOOLS); "
        "runs after the tests that need none",
    )


def tool_order(item: pytest.Item) -> int:
    """0 for a test that needs none of the tools, else one more than the latest-built one it
    names: the tools build after the control plane, in ``TOOLS``' order."""
    names = list(tb_build.TOOLS)
    needed = [mark.args[0] for mark in item.iter_markers("testbed_tool")]
    unknown = [name for name in needed if name not in names]
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: testbed_tool {unknown} is not one of {names}")
    return max((names.index(name) + 1 for name in needed), default=0)


_TOOLS_READY: set[str] = set()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """The tools a test needs are built, or waited for while CI builds them beside the tests,
    before its time limit starts (pytest-timeout's timer is set inside this wrapper): a wait
    for a build is not the test's slowness. Once per tool and session."""
    for mark in item.iter_markers("testbed_tool"):
        name = mark.args[0]
        if name not in _TOOLS_READY and not skip_requested():
            capture = item.config.pluginmanager.getplugin("capturemanager")
            with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
                tb_build.TOOLS[name](False)
            _TOOLS_READY.add(name)
    return (yield)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A stable sort: the order within each group (and a module's tests together) is kept.
    items.sort(key=tool_order)
    if not skip_requested():
        return
    marker = pytest.mark.skip(reason=f"{SKIP_ENV}=1")
    for item in items:
        if "testbed_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(marker)


_ACTIVE: list[TestbedCluster] = []
_FAILED_RUNS: list[Path] = []


@pytest.fixture(scope="session")
def testbed_cluster(pytestconfig: pytest.Config) -> Iterator[TestbedCluster]:
    if skip_requested():
        pytest.skip(f"{SKIP_ENV}=1")
    if tb_build.missing_binaries():
        # A cold build takes minutes; show its progress instead of a silent pause.
        capture = pytestconfig.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            tb_build.build(with_images=False, tools=False)
    running = tb_cluster.start(allow_build=False)
    try:
        api = kube.api_client(running.kubeconfig)
        topo = tb_topology.seed(api, tb_topology.node_groups())
        tb = TestbedCluster(running, api, topo)
        _ACTIVE.append(tb)
        yield tb
    finally:
        _ACTIVE.clear()
        running.stop()


@pytest.fixture(scope="session")
def real_node(
    testbed_cluster: TestbedCluster, pytestconfig: pytest.Config
) -> Iterator[tb_realnode.RealNode]:
    """One real node (kubelet + containerd) for the session, Ready before the first test.

    Pods reach it with ``node_selector`` and ``toleration`` and run ``image`` (Python 3.11)
    with ``imagePullPolicy: Never`` or ``IfNotPresent``. Needs root; if it cannot start, the
    error carries the kubelet and containerd log tails. It is stopped at session end, and the
    stop fails the session's last test teardown if anything is left on the machine.
    """
    if tb_build.missing_binaries() or tb_build.missing_images():
        capture = pytestconfig.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            tb_build.build(tools=False)
    node = tb_realnode.RealNode.start(testbed_cluster.cluster)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def make_pod(
    testbed_cluster: TestbedCluster, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """Create pods labelled with the test's name; they are force-deleted afterwards so the next
    test sees empty nodes."""
    test = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:63].strip("-")
    core = testbed_cluster.core

    def create(name: str, **kwargs: Any) -> str:
        body: Any = pod_manifest(name, test, **kwargs)
        core.create_namespaced_pod(testbed_cluster.namespace, body)
        return name

    yield create
    core.delete_collection_namespaced_pod(
        testbed_cluster.namespace, label_selector=f"{TEST_LABEL}={test}", grace_period_seconds=0
    )
    deadline = time.monotonic() + 30
    while core.list_namespaced_pod(
        testbed_cluster.namespace, label_selector=f"{TEST_LABEL}={test}"
    ).items:
        if time.monotonic() > deadline:
            raise AssertionError(f"pods of {test} not deleted")
        time.sleep(0.1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and _ACTIVE:
        tb = _ACTIVE[0]
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", item.nodeid)[-120:]
        target = tb.run_dir / "failures" / safe
        with contextlib.suppress(ApiException):
            tb.dump(target)
        tb.failures.append(f"{item.nodeid}: {target}")
        if tb.run_dir not in _FAILED_RUNS:
            _FAILED_RUNS.append(tb.run_dir)
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for run_dir in _FAILED_RUNS:
        terminalreporter.write_line(
            f"testbed: component logs in {run_dir / 'logs'}, "
            f"cluster dumps in {run_dir / 'failures'}"
        )


@contextlib.contextmanager
def only_runplane_env(values: dict[str, str]) -> Iterator[dict[str, str]]:
    """This process's ``RUNPLANE_*`` variables replaced by ``values`` for the block, so a
    developer's own settings never leak into a test's service."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("RUNPLANE_") and name != SKIP_ENV:
                patch.delenv(name)
        for name, value in values.items():
            patch.setenv(name, value)
        yield values

"""The chart's default install on the testbed's real node, proven the way a platform team would:
two replicas with a leader and the chart's own PostgreSQL (a StatefulSet on a
PersistentVolume), jobs submitted from the host with the CLI through the Service; the leader's
pod deleted under 20 running runs, the other replica leads within 15 s and every run ends
exactly once; the leader's process SIGKILLed in its container (no Lease released), the other
replica leads once the Lease expires and the killed one restarts as a follower; then ``helm
upgrade`` to a newer image that migrates the database, under pending and running runs: the
migration runs once, the runs end as they would have, nothing is lost.

The runs' pods go to the testbed's kwok nodes (they end after ``runplane.io/test-duration``);
the service and its database run in real containers on the real node, whose containerd gets the
images from archives built here (it cannot pull). No check reads ``runplane logs``: the
replicas do not share a runs' volume in this install.

The newer version is this checkout with ``.post1`` on its version and one migration more, which
exists only in the copy this test builds the image from (``newer_tree``): runplane ships no
migration that a test needs, and the copy's image is named so (``runplane.local/runplane:
<version>.post1``) that it is never mistaken for a release.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client
from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL

import runplane
from runplane import names
from testbed import postgres_image, service_image, storage
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.integration.test_helm_install import helm as run_helm

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(1200), pytest.mark.testbed_tool("helm")]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "runplane"
RELEASE = "rp"
TOKEN = "replicas-upgrade-token-for-the-tests"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
JOB_IMAGE = "registry.example/runplane/job:1"  # kwok runs no image
CODE = "def handler(context, x: int = 1):\n    return {'x': x}\n"
TAKEOVER = 15.0
PROBE_REVISION = "9000_upgrade_probe"
#: The test-only migration of the newer version: one column more on ``runs`` (an additive
#: change, as a rolling upgrade needs: the older replicas still serving ignore it) and a table
#: with one row per time it ran, naming the pod that ran it.
PROBE_MIGRATION = '''"""A newer version's migration, made by the upgrade test only."""

import socket

import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"


def upgrade() -> None:
    op.add_column("runs", sa.Column("upgrade_probe", sa.Text, nullable=True))
    probe = op.create_table(
        "upgrade_probe",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
    )
    op.bulk_insert(probe, [{{"host": socket.gethostname()}}])


def downgrade() -> None:
    op.drop_table("upgrade_probe")
    op.drop_column("runs", "upgrade_probe")
'''


def newer_tree(into: Path) -> Path:
    """A copy of this checkout's package with a newer version and the probe migration."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "src" / "runplane", into / "src" / "runplane", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, into / name)
    package = into / "src" / "runplane"
    init = package / "__init__.py"
    version = service_image.version(ROOT)
    init.write_text(init.read_text().replace(f'"{version}"', f'"{version}.post1"', 1))
    db = package / "service" / "db" / "__init__.py"
    head = re.search(r'^HEAD = "([^"]+)"', db.read_text(), re.M)
    assert head, "the schema's HEAD is not where the test looks for it"
    db.write_text(db.read_text().replace(head.group(0), f'HEAD = "{PROBE_REVISION}"'))
    migration = package / "service" / "db" / "migrations" / "versions" / f"{PROBE_REVISION}.py"
    migration.write_text(PROBE_MIGRATION.format(revision=PROBE_REVISION, down=head.group(1)))
    return into


@dataclass
class Install:
    namespace: str
    url: str
    values: dict[str, Any]
    helm: Callable[..., str]
    tb: TestbedCluster
    newer: str
    cli_env: dict[str, str]
    database_url: str
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def core(self) -> client.CoreV1Api:
        return self.tb.core

    def service_pods(self) -> list[Any]:
        pods = self.core.list_namespaced_pod(
            self.namespace, label_selector="app.kubernetes.io/component=service"
        ).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def holder(self) -> str:
        lease = client.CoordinationV1Api(self.tb.api).read_namespaced_lease(
            self.values["leaderElection"]["leaseName"], self.namespace
        )
        return str(lease.spec.holder_identity or "")

    def run(self, uid: str) -> dict[str, Any]:
        """The run's record through the Service. A connection that fails (to a SIGKILLed
        replica, until the endpoints drop it) is tried again, for at most a minute, and
        counted (``timings["service_retries"]``)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(
                    f"{self.url}/api/v1/runs/{uid}",
                    headers=HEADERS,
                    timeout=httpx.Timeout(30, connect=5),
                )
                break
            except httpx.TransportError:
                self.timings["service_retries"] = self.timings.get("service_retries", 0) + 1
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def cli(self, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "runplane", *args],
            env=self.cli_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def uids(self, name: str) -> list[str]:
        listed = json.loads(self.cli("runs", "-o", "json", "--limit", "200"))
        return [run["uid"] for run in listed if run["name"] == name]

    def pods_of(self, uid: str) -> list[Any]:
        return list(
            self.core.list_namespaced_pod(
                self.namespace, label_selector=f"{names.RUN_UID}={uid}"
            ).items
        )


class ConnectProbe:
    """What a client opening a new connection to the Service every 0.1 s sees during and after
    a rollout: each a fresh connection (no keep-alive) asking ``/api/v1/health``, given 3 s to
    connect. Failures are kept with the seconds since the probe began and what went wrong."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.began = time.monotonic()
        self.tries = 0
        self.failures: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def __enter__(self) -> ConnectProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _probe(self) -> None:
        timeout = httpx.Timeout(10, connect=3)
        while not self._stop.wait(0.1):
            self.tries += 1
            try:
                answer = httpx.get(f"{self.url}/api/v1/health", timeout=timeout)
                if answer.status_code != 200:
                    self._failed(f"HTTP {answer.status_code}")
            except httpx.TransportError as error:
                self._failed(f"{type(error).__name__}: {error}")

    def _failed(self, what: str) -> None:
        self.failures.append((round(time.monotonic() - self.began, 2), what))


def until(what: str, check: Callable[[], bool], timeout: float, every: float = 0.5) -> float:
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, f"{what}: not within {timeout} s"
        time.sleep(every)
    return time.monotonic() - start


def function_file(
    directory: Path, name: str, duration: str, cpu: str, node: str | None = None
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    code = directory / "job.py"
    code.write_text(CODE)
    fn = runplane.code_to_function(name, filename=str(code), handler="handler", image=JOB_IMAGE)
    fn.with_requests(cpu=cpu, mem="64Mi")
    fn.spec.annotations = {"runplane.io/test-duration": duration}
    if node:
        fn.spec.node_selector = {"kubernetes.io/hostname": node}
    path = directory / "function.yaml"
    path.write_text(yaml.safe_dump(fn.to_dict()))
    return path


def submit(install: Install, source: Path, count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` ``runplane run`` commands, each submitting one run through the Service and
    following it; their output is not read (logs are not shared by the replicas here)."""
    return [
        subprocess.Popen(
            [sys.executable, "-m", "runplane", "run", str(source)],
            env=install.cli_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]


def running(
    install: Install, tmp_path: Path, prefix: str, count: int
) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    """``count`` runs of 45 s submitted from the host, once all of them run (45 s: long enough
    that all run at once on a busy machine before the first ends); the commands following them
    (for :func:`stop`) and their uids."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    commands = submit(install, function_file(tmp_path, name, "45s", "100m"), count)
    try:
        until(f"{count} runs recorded", lambda: len(install.uids(name)) == count, 120, every=1)
        uids = install.uids(name)
        until(
            f"all {count} running",
            lambda: all(install.run(uid)["state"] == "running" for uid in uids),
            90,
        )
    except BaseException:
        stop(commands)
        raise
    return commands, uids


def stop(commands: list[subprocess.Popen[bytes]]) -> None:
    """SIGKILL what still follows (SIGTERM or Ctrl-C would abort its run)."""
    for command in commands:
        if command.poll() is None:
            command.kill()
        command.wait()


def ended_once(install: Install, uid: str) -> None:
    run = install.run(uid)
    states = [t["state"] for t in run["transitions"]]
    assert states == ["created", "pending", "running", "completed"], (uid, states)
    assert len(run["attempts"]) == 1, run["attempts"]
    pods = install.pods_of(uid)
    assert len(pods) == 1, [p.metadata.name for p in pods]
    assert pods[0].status.phase == "Succeeded"


def all_ended_once(install: Install, uids: list[str]) -> None:
    """Await every run's completion, then check each ended once (:func:`ended_once`)."""
    until(
        f"all {len(uids)} completed",
        lambda: all(install.run(uid)["state"] == "completed" for uid in uids),
        180,
        every=1,
    )
    for uid in uids:
        ended_once(install, uid)


@pytest.fixture(scope="module")
def install(
    testbed_cluster: TestbedCluster,
    real_node: RealNode,
    helm_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
) -> Iterator[Install]:
    """The chart's default install (two replicas, a leader, its PostgreSQL), Ready."""
    timings: dict[str, float] = {}
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    began = time.monotonic()
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        current = service_image.build()
        newer = service_image.build(root=newer_tree(tmp_path_factory.mktemp("newer")))
        database = postgres_image.build()
    timings["images_s"] = round(time.monotonic() - began, 1)
    began = time.monotonic()
    for built in (current, newer, database):
        real_node.import_archive(built.archive)
    timings["import_s"] = round(time.monotonic() - began, 1)

    kubeconfig = testbed_cluster.kubeconfig

    def helm(*args: str, timeout: float = 600) -> str:
        return run_helm(helm_env, kubeconfig, *args, timeout=timeout)

    namespace = f"replicas-{uuid.uuid4().hex[:6]}"
    core = testbed_cluster.core
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    volume = storage.local_volume(
        testbed_cluster.api, real_node, f"{namespace}-db", "1Gi", postgres_image.UID
    )
    repository, _, tag = current.name.rpartition(":")
    on_node = {"nodeSelector": real_node.node_selector, "tolerations": [real_node.toleration]}
    values: dict[str, Any] = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "replicas": 2,
        "leaderElection": {"enabled": True, "leaseName": "runplane-leader"},
        # Small enough that the upgrade's third replica also fits the 2-CPU node.
        "resources": {"cpu": "400m", "memory": "640Mi"},
        **on_node,
        "priorityClasses": {"create": False},  # the testbed has runplane's classes already
        "postgresql": {
            "enabled": True,
            "image": database.name,
            "pullPolicy": "Never",
            "resources": {"cpu": "250m", "memory": "256Mi"},
            "storage": {"size": "1Gi", "storageClassName": storage.STORAGE_CLASS},
            **on_node,
        },
        "tokens": {"list": [{"token": TOKEN, "user": "ci", "role": "admin"}]},
        # Runs go to the kwok nodes, which end them after their test duration.
        "config": {"function_defaults": {"image": JOB_IMAGE}},
    }
    values_file = tmp_path_factory.mktemp("values") / "values.json"
    values_file.write_text(json.dumps(values))
    try:
        began = time.monotonic()
        helm(
            "install",
            RELEASE,
            str(CHART),
            *("--namespace", namespace, "--values", str(values_file)),
            *("--wait", "--timeout", "8m"),
        )
        timings["install_s"] = round(time.monotonic() - began, 1)
        service = core.read_namespaced_service(f"{RELEASE}-runplane", namespace)
        url = f"http://{service.spec.cluster_ip}:{service.spec.ports[0].port}"
        database_service = core.read_namespaced_service(f"{RELEASE}-runplane-postgresql", namespace)
        secret = core.read_namespaced_secret(f"{RELEASE}-runplane-database", namespace)
        password = base64.b64decode(secret.data["password"]).decode()
        database_url = URL.create(
            "postgresql+psycopg",
            username="runplane",
            password=password,
            host=database_service.spec.cluster_ip,
            port=5432,
            database="runplane",
        ).render_as_string(hide_password=False)
        outside = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
        cli_env = outside | {
            "RUNPLANE_API": url,
            "RUNPLANE_TOKEN": TOKEN,
            "RUNPLANE_CONFIG": os.devnull,
        }
        made = Install(
            namespace,
            url,
            values,
            helm,
            testbed_cluster,
            newer.name,
            cli_env,
            database_url,
            timings,
        )
        yield made
    finally:
        print(f"\nchart with replicas and PostgreSQL: {timings}")  # noqa: T201
        with contextlib.suppress(AssertionError):
            helm("uninstall", RELEASE, "--namespace", namespace, "--wait")
        core.delete_collection_namespaced_persistent_volume_claim(namespace)
        core.delete_namespace(namespace)
        storage.delete_local_volume(testbed_cluster.api, real_node, volume)


def test_the_default_install_runs_two_replicas_on_its_own_postgresql(install: Install) -> None:
    pods = install.service_pods()
    assert len(pods) == 2
    assert all(p.status.phase == "Running" for p in pods)
    (database,) = install.core.list_namespaced_pod(
        install.namespace, label_selector="app.kubernetes.io/component=database"
    ).items
    assert database.status.phase == "Running"
    (claim,) = install.core.list_namespaced_persistent_volume_claim(install.namespace).items
    assert claim.status.phase == "Bound"
    assert claim.spec.storage_class_name == storage.STORAGE_CLASS
    roles = []
    for pod in pods:
        health = httpx.get(f"http://{pod.status.pod_ip}:8470/api/v1/health", timeout=30)
        roles.append(health.json().get("role"))
    assert sorted(roles) == ["follower", "leader"]


def test_the_leader_deleted_under_20_runs_loses_and_repeats_nothing(
    install: Install, tmp_path: Path
) -> None:
    commands, uids = running(install, tmp_path, "held", 20)
    try:
        holder = install.holder()
        (leader,) = [p for p in install.service_pods() if holder.startswith(p.metadata.name)]
        began = time.monotonic()
        install.core.delete_namespaced_pod(leader.metadata.name, install.namespace)
        # The Deployment starts a replacement at once; while the deleted leader serves out its
        # preStop sleep, the replacement becomes a follower too, so either may win the Lease.
        takeover = until(
            "another replica leads",
            lambda: install.holder() not in ("", holder),
            60,
            every=0.1,
        )
        install.timings["takeover_s"] = round(takeover, 2)
        print(f"\ntakeover after the leader's pod was deleted: {takeover:.2f} s")  # noqa: T201
        assert time.monotonic() - began < TAKEOVER
        all_ended_once(install, uids)
    finally:
        stop(commands)
    until("two replicas again", lambda: len(install.service_pods()) == 2, 180, every=1)


def test_the_leader_killed_outright_is_followed_once_its_lease_expires(
    install: Install, real_node: RealNode, tmp_path: Path
) -> None:
    """A crash, the OOM killer, a node's runtime killing the container: the leader's process
    ends with no SIGTERM, so it never releases the Lease. The other replica takes over when the
    Lease has gone unrenewed for leaseDurationSeconds (8 s) on its own clock; the killed
    container restarts in the same pod, with a new identity, as a follower."""
    commands, uids = running(install, tmp_path, "killed", 10)
    try:
        killed_identity = install.holder()
        (leader,) = [
            p for p in install.service_pods() if killed_identity.startswith(p.metadata.name)
        ]
        (other,) = [p for p in install.service_pods() if p.metadata.name != leader.metadata.name]
        (status,) = leader.status.container_statuses
        pid = real_node.container_pid(status.container_id)
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"serve" in command, command  # runplane serve is the container's process
        began = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        takeover = until(
            "the other replica leads",
            lambda: install.holder().startswith(other.metadata.name),
            60,
            every=0.1,
        )
        install.timings["takeover_after_sigkill_s"] = round(takeover, 2)
        print(f"\ntakeover after the leader's process was SIGKILLed: {takeover:.2f} s")  # noqa: T201
        # Not before the Lease expired: nobody released it.
        assert takeover >= 8 - 1, takeover
        assert time.monotonic() - began < TAKEOVER

        def restarted() -> bool:
            pod = install.core.read_namespaced_pod(leader.metadata.name, install.namespace)
            (now,) = pod.status.container_statuses
            return bool(now.restart_count == status.restart_count + 1 and now.ready)

        until("the killed replica restarted and ready", restarted, 120, every=1)
        pod = install.core.read_namespaced_pod(leader.metadata.name, install.namespace)
        health = httpx.get(f"http://{pod.status.pod_ip}:8470/api/v1/health", timeout=30)
        assert health.json()["role"] == "follower"
        assert install.holder().startswith(other.metadata.name)
        assert install.holder() != killed_identity
        all_ended_once(install, uids)
    finally:
        stop(commands)


def a_kwok_node(install: Install) -> tuple[str, int]:
    """A kwok node runs may use (no taint) and its allocatable CPU in millicores."""
    for node in install.core.list_node(label_selector="type=kwok").items:
        if not node.spec.taints:
            cpu = str(node.status.allocatable["cpu"])
            return node.metadata.name, int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000
    raise AssertionError("no untainted kwok node")


def test_an_upgrade_with_a_migration_under_pending_and_running_runs(
    install: Install, tmp_path: Path
) -> None:
    engine = create_engine(install.database_url)
    with engine.connect() as connection:
        runs_before = connection.execute(text("SELECT count(*) FROM runs")).scalar_one()
    # Four fit on the node at a time: the others wait, pending, for one to end (three waves
    # of 30 s, longer than the upgrade takes: about 16 s).
    node, cpu = a_kwok_node(install)
    name = f"upgrade-{uuid.uuid4().hex[:6]}"
    source = function_file(tmp_path, name, "30s", f"{cpu // 4 - 10}m", node)
    commands = submit(install, source, 10)
    try:
        until("10 runs recorded", lambda: len(install.uids(name)) == 10, 120, every=1)
        uids = install.uids(name)

        def states() -> list[str]:
            return [install.run(uid)["state"] for uid in uids]

        until("runs running and runs pending", lambda: {"running", "pending"} <= set(states()), 90)
        _, _, tag = install.newer.rpartition(":")
        began = time.monotonic()
        # New connections during the rollout and after it, while the old pods terminate: each
        # old pod goes on serving (preStopSleepSeconds) until it is out of the endpoints.
        with ConnectProbe(install.url) as probe:
            install.helm(
                "upgrade",
                RELEASE,
                str(CHART),
                *("--namespace", install.namespace, "--reuse-values"),
                *("--set", f"image.tag={tag}", "--wait", "--timeout", "8m"),
            )
            install.timings["upgrade_s"] = round(time.monotonic() - began, 1)
            time.sleep(15)  # the probe's window after the rollout: the old pods' ends
        install.timings["connects_during_upgrade"] = probe.tries
        assert not probe.failures, f"{len(probe.failures)} of {probe.tries}: {probe.failures}"
        pods = install.service_pods()
        assert len(pods) == 2
        assert {p.spec.containers[0].image for p in pods} == {install.newer}
        with engine.connect() as connection:
            version = connection.execute(text("SELECT version_num FROM alembic_version"))
            assert version.scalars().all() == [PROBE_REVISION]
            ran = connection.execute(text("SELECT host FROM upgrade_probe")).scalars().all()
        assert len(ran) == 1, f"the migration ran {len(ran)} times: {ran}"
        until(
            "the 10 runs completed",
            lambda: states() == ["completed"] * 10,
            300,
            every=2,
        )
        for uid in uids:
            ended_once(install, uid)
        with engine.connect() as connection:
            runs_after = connection.execute(text("SELECT count(*) FROM runs")).scalar_one()
        assert runs_after == runs_before + 10
    finally:
        stop(commands)
        engine.dispose()

"""Runs that really execute: ``runplane serve`` on the testbed's real kubelet node, pods of the
testbed's plain Python image (nothing of runplane in it), from submission to results."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

import runplane
from runplane import names
from testbed import realnode, serve
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode

ROOT = Path(__file__).resolve().parents[2]
TOKEN_VALUE = "real-node-token-for-the-tests"
TOKEN = {"Authorization": f"Bearer {TOKEN_VALUE}"}


@dataclass
class Service:
    """A ``runplane serve`` process on the real node's cluster, which can be killed and
    started again on the same database and home."""

    env: dict[str, str]
    home: Path
    namespace: str
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    http: httpx.Client = field(default_factory=lambda: httpx.Client(headers=TOKEN, timeout=30))

    def start(self) -> None:
        self.process, base = serve.start_service(self.env, self.home / "service.log")
        self.url = f"{base}/api/v1"

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)

    def submit(self, fn: runplane.Function, **body: Any) -> str:
        answer = self.http.post(f"{self.url}/runs", json={"function": fn.to_dict(), **body})
        assert answer.status_code == 201, answer.text
        return str(answer.json()["uid"])

    def get(self, uid: str) -> dict[str, Any]:
        answer = self.http.get(f"{self.url}/runs/{uid}")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def wait(self, uid: str, states: set[str], timeout: float = 90) -> dict[str, Any]:
        """The run's record once it is in one of ``states``."""
        deadline = time.monotonic() + timeout
        while (run := self.get(uid))["state"] not in states:
            assert time.monotonic() < deadline, f"run {uid} stayed {run['state']}: {run}"
            time.sleep(0.1)
        return run

    def output(self, uid: str) -> str:
        text, offset = b"", 0
        while True:
            answer = self.http.get(f"{self.url}/runs/{uid}/logs", params={"offset": offset})
            assert answer.status_code == 200, answer.text
            if not answer.content:
                return text.decode()
            text += answer.content
            offset = int(answer.headers["X-Runplane-Next-Offset"])

    def cli(self, *args: str, **options: Any) -> subprocess.Popen[str]:
        api = self.url.removesuffix("/api/v1")
        env = self.env | {"RUNPLANE_API": api, "RUNPLANE_TOKEN": TOKEN_VALUE}
        return subprocess.Popen(
            [sys.executable, "-m", "runplane", *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **options,
        )


@contextmanager
def real_node_service(
    testbed_cluster: TestbedCluster,
    real_node: RealNode,
    home: Path,
    prefix: str,
    secrets: Sequence[str] = (),
) -> Iterator[Service]:
    """``runplane serve`` in a namespace of its own (``prefix-`` and a random part), which it
    creates and which is deleted after; every function defaults to the real node and its
    image. The user may reference the Secrets named in ``secrets``, and only those."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:6]}"
    granted = list(secrets) or None
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")} | {
        **testbed_cluster.service_env(home, TOKEN_VALUE, namespace=namespace, secrets=granted),
        "RUNPLANE_FUNCTION_DEFAULTS__IMAGE": real_node.image,
        "RUNPLANE_FUNCTION_DEFAULTS__NODE_SELECTOR": json.dumps(real_node.node_selector),
        "RUNPLANE_FUNCTION_DEFAULTS__TOLERATIONS": json.dumps([real_node.toleration]),
    }
    running = Service(env=env, home=home, namespace=namespace)
    running.start()
    try:
        yield running
    finally:
        running.stop()
        k8s.CoreV1Api(testbed_cluster.api).delete_namespace(namespace)


@pytest.fixture(scope="module")
def service(
    testbed_cluster: TestbedCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """The service on the real node; the user may reference the Secret of the env test."""
    home = tmp_path_factory.mktemp("real-service")
    with real_node_service(testbed_cluster, real_node, home, "real", ["creds"]) as running:
        yield running


@pytest.fixture(scope="module")
def core(testbed_cluster: TestbedCluster) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(testbed_cluster.api)


@pytest.fixture(scope="module")
def shared_dir(
    service: Service, core: k8s.CoreV1Api, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A directory of this machine that runs see at ``/data``: a hostPath PersistentVolume
    bound to the claim ``data`` in the service's namespace."""
    path = tmp_path_factory.mktemp("pv")
    path.chmod(0o777)
    pv = f"{service.namespace}-data"
    core.create_persistent_volume(realnode.host_path_volume(pv, path))
    core.create_namespaced_persistent_volume_claim(
        service.namespace,
        {
            "metadata": {"name": "data"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": pv,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
    )
    return path


def function(
    tmp_path: Path, code: str, handler: str = "handler", name: str = "job"
) -> runplane.Function:
    source = tmp_path / f"{name}.py"
    source.write_text(code)
    fn = runplane.code_to_function(name, filename=str(source), handler=handler)
    return fn.with_requests(cpu="100m", mem="64Mi")


def with_data(fn: runplane.Function) -> runplane.Function:
    return fn.apply(runplane.mount_pvc("data", "data", "/data"))


def pods_of(core: k8s.CoreV1Api, service: Service, uid: str) -> list[Any]:
    return list(
        core.list_namespaced_pod(service.namespace, label_selector=f"{names.RUN_UID}={uid}").items
    )


# -- what a run computes comes back ------------------------------------------------------------


def test_the_example_job_runs_in_a_pod_and_prints_its_results(service):
    """The user's path: ``runplane run`` against the service, the handler computed in a pod."""
    command = service.cli(
        "run", "examples/train.py", "--handler", "train", "--param", "epochs=4", "--cpu", "100m"
    )
    stdout, stderr = command.communicate(timeout=120)
    assert command.returncode == 0, stdout + stderr
    assert "epoch 3: loss 0.6561" in stderr  # the handler's own log lines, from the pod
    assert "loss=0.6561" in stdout
    assert "duration  -" not in stdout  # pod times are whole seconds: never before the run's
    assert "duration  0.0s" not in stdout  # ...nor a run that took no time at all
    assert "epochs=4.0" in stdout
    assert "usage     not measured" in stdout  # no metrics source: not "cpu 0.00s"


def test_results_logged_values_and_an_artifact_on_a_volume(service, shared_dir, tmp_path):
    code = (
        "import sys\n"
        "def handler(context, rows: int, scale: float = 1.0):\n"
        "    context.log_result('accuracy', 0.5 * scale)\n"
        "    context.log_result('python', sys.version_info[:2])\n"
        "    context.log_artifact('model', body='weights' * rows)\n"
        "    return {'rows': rows}\n"
    )
    fn = with_data(function(tmp_path, code))
    fn.spec.artifact_path = "/data/{{run.uid}}"
    uid = service.submit(fn, params={"rows": "3"})
    run = service.wait(uid, {"completed", "error"})
    assert run["state"] == "completed", run
    assert run["results"] == {
        "accuracy": 0.5,
        "python": [3, 11],
        "rows": 3,
        "return": {"rows": 3},
    }
    (artifact,) = run["artifacts"]
    assert artifact["path"] == f"/data/{uid}/model"
    assert (shared_dir / uid / "model").read_text() == "weights" * 3
    assert artifact["size"] == len("weights" * 3)


def test_results_too_large_for_the_termination_message(service, tmp_path):
    code = "def handler(context):\n    return {'big': 'x' * 20000}\n"
    uid = service.submit(function(tmp_path, code))
    run = service.wait(uid, {"completed", "error"})
    assert run["state"] == "completed", run
    assert run["results"] == {"big": "x" * 20000, "return": {"big": "x" * 20000}}
    assert "runplane-results" not in service.output(uid)  # the report is not output


def test_env_from_a_secret_and_files_from_a_configmap_and_a_claim(
    service, core, shared_dir, tmp_path
):
    core.create_namespaced_secret(
        service.namespace, {"metadata": {"name": "creds"}, "stringData": {"token": "s3cr3t"}}
    )
    core.create_namespaced_config_map(
        service.namespace,
        {"metadata": {"name": "settings"}, "data": {"app.ini": "[app]\nlevel = 3\n"}},
    )
    (shared_dir / "input.txt").write_text("from the claim")
    code = (
        "import os\n"
        "def handler(context):\n"
        "    with open('/data/output.txt', 'w') as out:\n"
        "        out.write('from the pod')\n"
        "    return {\n"
        "        'token': os.environ['TOKEN'],\n"
        "        'plain': os.environ['PLAIN'],\n"
        "        'ini': open('/etc/app/app.ini').read(),\n"
        "        'claim': open('/data/input.txt').read(),\n"
        "    }\n"
    )
    fn = with_data(function(tmp_path, code))
    fn.set_env_from_secret("TOKEN", "creds", "token").set_envs({"PLAIN": "value"})
    fn.apply(runplane.mount_configmap("settings", "/etc/app"))
    run = service.wait(service.submit(fn), {"completed", "error"})
    assert run["state"] == "completed", run
    returned = {
        "token": "s3cr3t",
        "plain": "value",
        "ini": "[app]\nlevel = 3\n",
        "claim": "from the claim",
    }
    assert run["results"] == {**returned, "return": returned}
    assert (shared_dir / "output.txt").read_text() == "from the pod"


# -- how runs end ------------------------------------------------------------------------------


def test_the_kernel_kills_a_run_over_its_memory_limit(service, tmp_path):
    code = (
        "def handler(context):\n"
        "    hog = bytearray(200 * 2**20)\n"
        "    hog[::4096] = b'x' * len(hog[::4096])\n"
    )
    fn = function(tmp_path, code).with_limits(mem="64Mi")
    run = service.wait(service.submit(fn), {"completed", "error"})
    assert (run["state"], run["reason"]) == ("error", "OOMKilled"), run
    assert run["attempts"][-1]["exit_code"] == 137


def test_a_failing_handler_ends_error_with_its_exit_code_and_message(service, tmp_path):
    code = "def handler(context):\n    raise ValueError('bad input')\n"
    run = service.wait(service.submit(function(tmp_path, code)), {"completed", "error"})
    assert run["state"] == "error"
    assert run["attempts"][-1]["exit_code"] == 1
    assert "ValueError: bad input" in run["status_text"]
    assert "Traceback" in service.output(run["uid"])


def test_an_image_that_does_not_exist_breaches_its_pull_threshold(service, tmp_path):
    fn = function(tmp_path, "def handler(context):\n    pass\n")
    fn.spec.image = "runplane.local/no-such-image:1"
    uid = service.submit(fn, state_thresholds={"image_pull_backoff": "3s"})
    run = service.wait(uid, {"aborted", "error", "completed"}, timeout=120)
    assert (run["state"], run["reason"]) == ("aborted", "ThresholdExceeded"), run
    assert "image_pull_backoff" in run["status_text"]


STOPPABLE = (
    "import time\n"
    "def handler(context):\n"
    "    print('working', flush=True)\n"
    "    try:\n"
    "        while True:\n"
    "            time.sleep(0.1)\n"
    "    finally:\n"
    "        print('cleaned up', flush=True)\n"
)


@pytest.mark.parametrize("how", ["abort", "threshold"])
def test_a_stopped_run_gets_sigterm_and_its_pod_goes(service, core, tmp_path, how):
    fn = function(tmp_path, STOPPABLE)
    thresholds = {"running": "3s"} if how == "threshold" else {}
    uid = service.submit(fn, state_thresholds=thresholds)
    service.wait(uid, {"running"})
    if how == "abort":
        assert service.http.post(f"{service.url}/runs/{uid}/abort").status_code == 200
    stopping = time.monotonic()
    run = service.wait(uid, {"aborted", "error", "completed"})
    assert run["state"] == "aborted", run
    assert time.monotonic() - stopping < 30  # within the pod's grace period
    assert "cleaned up" in service.output(uid)  # SIGTERM, not SIGKILL: the handler unwound
    deadline = time.monotonic() + 30
    while pods_of(core, service, uid):
        assert time.monotonic() < deadline, "the aborted run's pod was not deleted"
        time.sleep(0.2)


# -- output ------------------------------------------------------------------------------------


def test_logs_follow_streams_lines_as_they_are_printed(service, shared_dir, tmp_path):
    gate = shared_dir / f"gate-{uuid.uuid4().hex[:6]}"
    code = (
        "import os, time\n"
        "def handler(context):\n"
        "    print('first', flush=True)\n"
        f"    while not os.path.exists('/data/{gate.name}'):\n"
        "        time.sleep(0.05)\n"
        "    print('second', flush=True)\n"
    )
    uid = service.submit(with_data(function(tmp_path, code)))
    follower = service.cli("logs", "-f", uid)
    assert follower.stdout is not None
    assert follower.stdout.readline() == "first\n"  # while the run waits for the gate
    assert service.get(uid)["state"] == "running"
    gate.touch()
    assert follower.stdout.readline() == "second\n"
    assert follower.wait(timeout=60) == 0


def test_a_killed_service_loses_nothing_of_a_run(service, core, shared_dir, tmp_path):
    """SIGKILL mid-run: the run finishes while no service watches; the next one records its
    end, its results and all of its output, once."""
    gate = shared_dir / f"gate-{uuid.uuid4().hex[:6]}"
    code = (
        "import os, time\n"
        "def handler(context):\n"
        "    print('before', flush=True)\n"
        f"    while not os.path.exists('/data/{gate.name}'):\n"
        "        time.sleep(0.05)\n"
        "    print('after', flush=True)\n"
        "    return {'done': True}\n"
    )
    uid = service.submit(with_data(function(tmp_path, code)))
    service.wait(uid, {"running"})
    deadline = time.monotonic() + 30
    while service.output(uid) != "before\n":
        assert time.monotonic() < deadline, service.output(uid)
        time.sleep(0.1)
    service.kill()
    gate.touch()
    deadline = time.monotonic() + 60
    while not (pods := pods_of(core, service, uid)) or pods[0].status.phase != "Succeeded":
        assert time.monotonic() < deadline, "the run's pod did not finish"
        time.sleep(0.2)
    service.start()
    run = service.wait(uid, {"completed", "error"})
    assert run["state"] == "completed", run
    assert run["results"] == {"done": True, "return": {"done": True}}
    assert [t["state"] for t in run["transitions"]] == [
        "created",
        "pending",
        "running",
        "completed",
    ]
    assert service.output(uid) == "before\nafter\n"


def test_the_cluster_report_shows_the_real_node_ready(service, real_node):
    cluster = service.http.get(f"{service.url}/cluster").json()
    assert cluster["runtime"] == "kubernetes"
    assert cluster["ready"] is True
    (node,) = [n for n in cluster["nodes"] if n["name"] == real_node.name]
    assert node["ready"] is True
    assert node["condition"] == ""
    assert node["group"] == "real"


def test_a_running_run_holds_its_requests_on_the_node(service, real_node, tmp_path):
    """What the node has allocated is what the run asked for, as the scheduler counts it."""

    def free() -> dict[str, int]:
        cluster = service.http.get(f"{service.url}/cluster").json()
        (node,) = [n for n in cluster["nodes"] if n["name"] == real_node.name]
        return dict(node["free"])

    before = free()
    fn = function(tmp_path, STOPPABLE).with_requests(cpu="250m", mem="96Mi")
    uid = service.submit(fn)
    service.wait(uid, {"running"})
    during = free()
    assert before["cpu"] - during["cpu"] == 250
    assert before["memory"] - during["memory"] == 96 * 2**20
    assert service.http.post(f"{service.url}/runs/{uid}/abort").status_code == 200
    service.wait(uid, {"aborted"})


def test_an_evicted_attempt_checkpoints_in_its_grace_period_and_the_next_resumes(
    service, core, shared_dir, tmp_path
):
    """SIGTERM reaches the handler in the pod: its preemption callback writes a checkpoint on
    the volume within the grace period, and the retried attempt finds it."""
    code = (
        "import time\n"
        "def handler(context):\n"
        "    last = context.last_checkpoint\n"
        "    if last is not None:\n"
        "        with open(last) as f:\n"
        "            return {'resumed_from': f.read(), 'attempt': context.attempt}\n"
        "    context.on_preemption(lambda: context.save_checkpoint('step', 'step-7'))\n"
        "    print('working', flush=True)\n"
        "    while True:\n"
        "        time.sleep(0.1)\n"
    )
    fn = (
        with_data(function(tmp_path, code))
        .with_checkpoints(path="/data/ckpt/{{run.uid}}", grace_period_seconds=20)
        .with_retries(max_attempts=2, on=["preempted"], backoff="1s")
    )
    uid = service.submit(fn)
    service.wait(uid, {"running"})
    deadline = time.monotonic() + 60
    while "working" not in service.output(uid):  # the callback is in place
        assert time.monotonic() < deadline, service.output(uid)
        time.sleep(0.1)
    (pod,) = pods_of(core, service, uid)
    core.create_namespaced_pod_eviction(
        pod.metadata.name,
        service.namespace,
        {"metadata": {"name": pod.metadata.name, "namespace": service.namespace}},
    )
    run = service.wait(uid, {"completed", "error", "aborted"}, timeout=120)
    assert run["state"] == "completed", run
    assert run["results"]["resumed_from"] == "step-7"
    assert run["results"]["attempt"] == 2
    assert (shared_dir / "ckpt" / uid / "step").read_text() == "step-7"
    assert len(run["attempts"]) == 2


HOLDS_48_MIB = """\
import time


def handler(context):
    held = bytearray(48 * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(8)
    return {"held": len(held)}
"""


def ui_session(service: Service) -> httpx.Client:
    """An HTTP client logged in to the UI as a user is: the login form, sent with the token."""
    base = service.url.removesuffix("/api/v1")
    browser = httpx.Client(base_url=base, timeout=30)
    form = browser.get("/ui/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
    assert nonce is not None, form.text
    answer = browser.post("/ui/login", data={"token": TOKEN_VALUE, "nonce": nonce.group(1)})
    assert answer.status_code in (200, 303), answer.text
    return browser


def test_a_run_on_the_real_node_has_its_usage_sampled_from_its_kubelet_and_drawn(service, tmp_path):
    """The sampler reads the pod's working set from its node's kubelet summary, through the
    API server's node proxy, while the run runs; its page draws what was sampled."""
    fn = function(tmp_path, HOLDS_48_MIB).with_limits(mem="256Mi")
    uid = service.submit(fn)
    run = service.wait(uid, {"completed", "error"}, timeout=120)
    assert run["state"] == "completed", run
    samples: list[Any] = []
    deadline = time.monotonic() + 30  # the last ones are written at the sampler's next look
    while not samples or max(memory for _, memory, _ in samples) < 48 * 2**20:
        assert time.monotonic() < deadline, f"no sample reached 48 MiB: {samples}"
        answer = service.http.get(f"{service.url}/runs/{uid}/usage/samples")
        assert answer.status_code == 200, answer.text
        samples = answer.json()["samples"]
        time.sleep(0.5)
    assert len(samples) >= 2, samples
    assert [at for at, _, _ in samples] == sorted(at for at, _, _ in samples)
    # CPU time is not asserted: on a cgroup v1 host (this testbed's) the summary's containers
    # read 0 and their pod's figure is refreshed by cadvisor's housekeeping, every ~10 s,
    # longer than this run lives
    browser = ui_session(service)
    try:
        page = browser.get(f"/ui/runs/{uid}")
    finally:
        browser.close()
    assert page.status_code == 200, page.text
    drawn = re.search(r'<svg class="chart" id="usage-memory"[^>]*data-points="(\d+)"', page.text)
    assert drawn is not None, page.text
    assert int(drawn.group(1)) == len(samples)
    words = re.search(r"Memory over time: peak ([\d.]+)Mi", page.text)
    assert words is not None, page.text
    assert float(words.group(1)) >= 48, words.group(0)

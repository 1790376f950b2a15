"""A serving function's replicas on this machine, kept as its Deployment says: the supervisor.

One supervisor process per deployment (``python -m runplane.runtimes.local.replicas DIR``),
started by :func:`runplane.runtimes.local.serving.deploy` in a session of its own so that it
outlives the caller, does here what a cluster's controllers do there:

- each replica is a pod: it holds a claim on the capacity ledger (its requests, its cores,
  its GPUs) and starts only when granted, so deployments and runs share the machine honestly;
- a replica above its memory limit is killed (``OOMKilled``), and any replica that exits is
  started again after a back-off (1 s, doubling, at most 30 s; reset after 60 s of running),
  as the kubelet restarts a pod's container;
- with an autoscaler the count follows :class:`~runplane.runtimes.local.autoscale.Autoscaler`
  every ``serving.scale_interval`` seconds;
- what it knows goes to ``status.json`` in its directory (``runplane get deployments``).

SIGTERM stops every replica (SIGTERM, then SIGKILL after 10 s) and releases their claims.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from runplane import names
from runplane.bootstrap import Invocation
from runplane.config import Settings
from runplane.placement import evaluate
from runplane.rendering.resources import EffectiveResources
from runplane.runs import Reason
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.deployments import DeploymentState, deployment_state
from runplane.runtimes.local.autoscale import Autoscaler
from runplane.runtimes.local.detached import start_module
from runplane.runtimes.local.launch import LocalRun, environment, plan
from runplane.runtimes.local.ledger import Grant, Ledger
from runplane.runtimes.local.node import detect_capacity, local_node
from runplane.runtimes.local.replica import READY
from runplane.runtimes.output import OUTPUT, private_dir

log = logging.getLogger(__name__)

TICK = 0.2
BACKOFF_FIRST = 1.0
BACKOFF_MOST = 30.0
#: A replica that ran this long without exiting starts its next back-off from the first step.
BACKOFF_RESET = 60.0
STOP_GRACE = 10.0


def replica_request(manifests: list[dict[str, Any]], settings: Settings, index: int) -> RunRequest:
    """Replica ``index`` of the rendered Deployment in ``manifests``, as the pod it would be."""
    deployment = next(m for m in manifests if m["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    name = deployment["metadata"]["name"]
    project = deployment["metadata"]["labels"][names.PROJECT]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-{index}", "labels": dict(template["metadata"]["labels"])},
        "spec": template["spec"],
    }
    spec = template["spec"]
    resources = EffectiveResources.of_container(
        spec["containers"][0], settings, spec["priorityClassName"]
    )
    return RunRequest(
        invocation=Invocation(f"serving-{project}-{name}-{index}", project, name, "", "", ""),
        manifests=[pod],
        resources=resources,
        submitted=time.time(),
    )


def scaling_of(manifests: list[dict[str, Any]]) -> tuple[int, int, int] | None:
    """The autoscaler's (min, max, target CPU %) when the deployment has one."""
    for manifest in manifests:
        if manifest["kind"] == "HorizontalPodAutoscaler":
            spec = manifest["spec"]
            target = spec["metrics"][0]["resource"]["target"]["averageUtilization"]
            return spec["minReplicas"], spec["maxReplicas"], target
    return None


@dataclass(slots=True)
class Replica:
    index: int
    run: LocalRun
    directory: Path
    grant: Grant | None = None
    process: subprocess.Popen[bytes] | None = None
    state: str = "pending"
    message: str = "waiting for capacity"
    restarts: int = 0
    last_exit: str = ""
    started: float = 0.0
    next_start: float = 0.0
    crash_streak: int = 0
    oom: bool = False
    cpu_seen: float = 0.0
    waiting_since: float = field(default_factory=time.time)

    @property
    def uid(self) -> str:
        return self.run.uid


class ReplicaSet:
    """The supervisor's state and its one loop (:meth:`run`)."""

    def __init__(self, directory: Path, settings: Settings) -> None:
        self.directory = directory
        self.settings = settings
        self.manifests: list[dict[str, Any]] = json.loads(
            (directory / "manifests.json").read_text(encoding="utf-8")
        )
        deployment = next(m for m in self.manifests if m["kind"] == "Deployment")
        self.name = deployment["metadata"]["name"]
        self.project = deployment["metadata"]["labels"][names.PROJECT]
        options = json.loads((directory / "options.json").read_text(encoding="utf-8"))
        self.host: str = options["host"]
        self.port: int = options["port"]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        env = {item["name"]: item.get("value") for item in container.get("env", [])}
        self.workers = int(env.get(names.ENV_HTTP_WORKERS) or 1)
        capacity = detect_capacity(settings)
        node = local_node(settings, capacity)
        self.ledger = Ledger(
            settings.local.home / "capacity.db",
            node,
            capacity.cpu_ids,
            capacity.gpu_ids,
            held_to_quotas=False,  # replicas count against their project's quota, never wait for it
        )
        scaling = scaling_of(self.manifests)
        self.autoscaler = (
            Autoscaler(*scaling, scale_down_delay=settings.serving.scale_down_delay)
            if scaling
            else None
        )
        self.node_name = node.name
        self.desired: int = deployment["spec"]["replicas"]
        self.cpu_request = plan(
            replica_request(self.manifests, settings, 0), settings, node.name
        ).requirements.requests.get("cpu", 0)
        self.scaling = "" if self.autoscaler else "fixed replica count"
        self.replicas: dict[int, Replica] = {}
        self.stopping = False
        self._next_scale = time.monotonic() + settings.serving.scale_interval
        self._status = ""

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        try:
            while not self.stopping:
                if not (self.directory / "manifests.json").is_file():
                    break  # the deployment was removed under it: nothing to keep running
                self.tick()
                time.sleep(TICK)
        finally:
            self.stop_all()

    def _stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def tick(self) -> None:
        self._resize()
        self._reap()
        self._limit_memory()
        self._grant()
        self._start_due()
        self._readiness()
        if time.monotonic() >= self._next_scale:
            self._next_scale = time.monotonic() + self.settings.serving.scale_interval
            self._autoscale()
        self._write_status()

    # -- replicas -------------------------------------------------------------------------

    def _resize(self) -> None:
        for index in range(self.desired):
            if index not in self.replicas:
                request = replica_request(self.manifests, self.settings, index)
                run = plan(request, self.settings, self.node_name)
                replica = Replica(index, run, private_dir(self.directory / f"replica-{index}"))
                self.ledger.wait(run.claim)
                self.replicas[index] = replica
        for index in sorted(self.replicas, reverse=True):
            if index >= self.desired:
                self._remove(self.replicas.pop(index))

    def _remove(self, replica: Replica) -> None:
        if replica.process is not None:
            self._terminate([replica])
        self.ledger.release(replica.uid)

    def _grant(self) -> None:
        waiting = [r.uid for r in self.replicas.values() if r.grant is None]
        if not waiting:
            return
        by_uid = {r.uid: r for r in self.replicas.values()}
        for grant in self.ledger.grant(waiting):
            replica = by_uid[grant.uid]
            replica.grant = grant
            replica.next_start = time.monotonic()
        occupied = None
        for replica in self.replicas.values():
            if replica.grant is None:
                occupied = occupied or self.ledger.occupied()
                fit = evaluate(replica.run.requirements, [occupied])
                replica.message = fit.message if not fit.schedulable else "waiting in the queue"

    def _start_due(self) -> None:
        now = time.monotonic()
        for replica in self.replicas.values():
            if replica.grant is not None and replica.process is None and now >= replica.next_start:
                self._spawn(replica)

    def _spawn(self, replica: Replica) -> None:
        assert replica.grant is not None
        directory = replica.directory
        work = private_dir(directory / "work")
        private_dir(directory / "home")
        private_dir(directory / "tmp")
        (directory / READY).unlink(missing_ok=True)
        spec = {
            "supervisor_pid": os.getpid(),
            "cpu_ids": list(replica.grant.cpu_ids) if replica.run.cores else [],
            "host": self.host,
            "port": self.port,
        }
        (directory / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        env = environment(replica.run, replica.grant, self.settings)
        env.update(
            {
                "HOME": str(directory / "home"),
                "TMPDIR": str(directory / "tmp"),
                names.ENV_HTTP_PORT: str(self.port),
            }
        )
        env.pop(names.ENV_RUN_DIR, None)
        replica.process = start_module(
            "runplane.runtimes.local.replica",
            directory,
            directory / OUTPUT,
            env,
            work,
            banner=f"--- replica {replica.index} starting ---",
        )
        replica.state, replica.message = "starting", f"process {replica.process.pid}"
        replica.started = time.monotonic()
        replica.oom = False
        replica.cpu_seen = 0.0

    def _reap(self) -> None:
        now = time.monotonic()
        for replica in self.replicas.values():
            process = replica.process
            if process is None or process.poll() is None:
                continue
            _kill_tree(process.pid)
            code = process.returncode
            exit_code = 128 - code if code < 0 else code
            ended = Reason.COMPLETED if code == 0 else Reason.ERROR
            reason = Reason.OOM_KILLED if replica.oom else ended
            replica.last_exit = f"{reason}, exit code {exit_code}"
            if now - replica.started >= BACKOFF_RESET:
                replica.crash_streak = 0
            delay = min(BACKOFF_FIRST * 2**replica.crash_streak, BACKOFF_MOST)
            replica.crash_streak += 1
            replica.restarts += 1
            replica.process = None
            replica.state = "restarting"
            replica.message = f"{replica.last_exit}; starting again in {delay:g} s"
            replica.next_start = now + delay
            log.warning("replica %d of %s: %s", replica.index, self.name, replica.message)

    def _limit_memory(self) -> None:
        for replica in self.replicas.values():
            limit = replica.run.memory_limit
            if replica.process is None or limit is None or replica.oom:
                continue
            used = _tree_rss(replica.process.pid)
            if used > limit:
                replica.oom = True
                log.warning(
                    "replica %d of %s uses %d bytes, above its limit %d: killed",
                    replica.index,
                    self.name,
                    used,
                    limit,
                )
                _kill_tree(replica.process.pid)

    def _readiness(self) -> None:
        for replica in self.replicas.values():
            if replica.process is not None and replica.state == "starting":
                ready = replica.directory / READY
                if ready.is_file() and ready.read_text(encoding="utf-8") == str(
                    replica.process.pid
                ):
                    replica.state, replica.message = "ready", f"process {replica.process.pid}"

    def _autoscale(self) -> None:
        if self.autoscaler is None:
            return
        ready = [r for r in self.replicas.values() if r.state == "ready" and r.process]
        utilisation = None
        if self.cpu_request and ready:
            interval = self.settings.serving.scale_interval
            used = []
            for replica in ready:
                assert replica.process is not None
                seconds = _tree_cpu(replica.process.pid)
                if replica.cpu_seen:
                    used.append((seconds - replica.cpu_seen) / interval)
                replica.cpu_seen = seconds
            if used:
                utilisation = 100 * (sum(used) / len(used)) * 1000 / self.cpu_request
        if self.cpu_request and utilisation is None:
            return  # the first measurement only sets the baseline
        decision = self.autoscaler.decide(time.monotonic(), self.desired, utilisation)
        if decision.desired != self.desired:
            log.warning("%s: %s", self.name, decision.reason)
        self.scaling = decision.reason
        self.desired = decision.desired

    # -- stopping and reporting -----------------------------------------------------------

    def _terminate(self, replicas: list[Replica]) -> None:
        running = [r for r in replicas if r.process is not None]
        for replica in running:
            assert replica.process is not None
            with contextlib.suppress(ProcessLookupError):
                replica.process.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for replica in running:
            assert replica.process is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                replica.process.wait(max(deadline - time.monotonic(), 0.1))
            _kill_tree(replica.process.pid)
            replica.process.wait()
            replica.process = None

    def stop_all(self) -> None:
        self._terminate(list(self.replicas.values()))
        for replica in self.replicas.values():
            self.ledger.release(replica.uid)
        self.replicas.clear()
        self.desired = 0
        self._write_status(stopped=True)

    def status(self, stopped: bool = False) -> dict[str, Any]:
        scaling = scaling_of(self.manifests)
        ready = sum(1 for r in self.replicas.values() if r.state == "ready")
        return {
            "name": self.name,
            "project": self.project,
            "url": f"http://{self.host}:{self.port}",
            "supervisor": os.getpid(),
            "supervisor_started": psutil.Process().create_time(),
            "state": DeploymentState.STOPPED if stopped else deployment_state(self.desired, ready),
            "desired": self.desired,
            "ready": ready,
            "min_replicas": scaling[0] if scaling else None,
            "max_replicas": scaling[1] if scaling else None,
            "workers": self.workers,
            "scaling": self.scaling,
            "replicas": [
                {
                    "index": r.index,
                    "state": r.state,
                    "pid": r.process.pid if r.process else None,
                    "restarts": r.restarts,
                    "last_exit": r.last_exit,
                    "message": r.message,
                }
                for r in sorted(self.replicas.values(), key=lambda r: r.index)
            ],
        }

    def _write_status(self, stopped: bool = False) -> None:
        text = json.dumps(self.status(stopped), indent=1)
        if text == self._status:
            return
        temporary = self.directory / "status.json.tmp"
        with contextlib.suppress(FileNotFoundError):  # the deployment was removed
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, self.directory / "status.json")
            self._status = text


def _processes(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _tree_rss(pid: int) -> int:
    total = 0
    for process in _processes(pid):
        with contextlib.suppress(psutil.Error):
            total += process.memory_info().rss
    return total


def _tree_cpu(pid: int) -> float:
    total = 0.0
    for process in _processes(pid):
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def _kill_tree(pid: int) -> None:
    """The replica's processes and its session's group, which it leads."""
    for process in _processes(pid):
        with contextlib.suppress(psutil.Error):
            process.kill()
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def main(directory: Path) -> int:
    if os.fork():  # a daemon: the process that started it reaps this one at once
        os._exit(0)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    data = json.loads((directory / "settings.json").read_text(encoding="utf-8"))
    ReplicaSet(directory, Settings(**data)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

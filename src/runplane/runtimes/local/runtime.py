"""The local runtime: rendered pods become supervised processes on this machine.

One scheduler thread per process asks the capacity ledger for grants; one supervisor thread
per running run starts the run's process, enforces its memory limit, watches for aborts, and
reports the end. Everything the runtime learns leaves as a :class:`RunEvent`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from runplane.config import Settings
from runplane.errors import InvalidValueError, NotFoundError
from runplane.placement import Node, PodRequirements, evaluate
from runplane.placement.model import resource_amount
from runplane.runtimes.base import RunRequest
from runplane.runtimes.events import Listener, RunEvent, RunState, Usage
from runplane.runtimes.local.ledger import Claim, Grant, Ledger
from runplane.runtimes.local.node import GPU_RESOURCE, detect_capacity, local_node

OOM_EXIT_CODE = 137
_CONDITIONS = {RunState.PENDING: "pending_not_scheduled", RunState.RUNNING: "running"}


@dataclass(slots=True)
class _Prepared:
    run: RunRequest
    requirements: PodRequirements
    env: dict[str, str]
    mounts: dict[str, str]
    memory_limit: int | None
    cores: int
    gpus: int
    run_dir: Path
    message: str = ""
    never_fits: bool = False
    abort: tuple[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)


def _describe(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"cpu {amount / 1000:g}"
    if resource == "memory":
        return f"memory {amount / 2**30:.1f}Gi"
    return f"{resource} {amount}"


def _hint(pod: PodRequirements, node: Node, message: str) -> str:
    """A sentence on why a pod can never fit this machine, beyond the scheduler's words."""
    terms = json.dumps(pod.required_terms or [])
    if '"operator": "In"' in terms and "preemptible" in terms:
        return (
            "preemption mode 'constrain' needs spot nodes; this machine is on-demand "
            f"(labels {node.labels})"
        )
    if "Insufficient" in message:
        short = [r for r, amount in pod.requests.items() if amount > node.allocatable.get(r, 0)]
        asked = ", ".join(_describe(r, pod.requests[r]) for r in short)
        has = ", ".join(_describe(r, node.allocatable.get(r, 0)) for r in short)
        return f"it asks for {asked}, and this machine has {has} in all"
    return f"this machine's labels are {node.labels}"


class LocalRuntime:
    """Runs rendered pods as processes here, never overbooking the machine."""

    def __init__(self, settings: Settings, listener: Listener) -> None:
        self.settings = settings
        self.home = settings.local.home
        capacity = detect_capacity(settings)
        self.node = local_node(settings, capacity)
        self._ledger = Ledger(
            self.home / "capacity.db", self.node, capacity.cpu_ids, capacity.gpu_ids
        )
        self._listener = listener
        self._processes = _ProcessTable(max_age=settings.local.poll_interval)
        self._lock = threading.Lock()
        self._waiting: dict[str, _Prepared] = {}
        self._running: dict[str, _Prepared] = {}
        self._wake = threading.Event()
        self._closed = False
        self._scheduler = threading.Thread(
            target=self._schedule, name="runplane-scheduler", daemon=True
        )
        self._scheduler.start()

    # -- preparing ------------------------------------------------------------------------

    def prepare(self, run: RunRequest) -> _Prepared:
        """Check what can be checked before anything starts: volumes, secrets, GPUs."""
        spec = run.pod_spec
        container = spec["containers"][0]
        requirements = PodRequirements.from_pod_spec(spec)
        limits = container.get("resources", {}).get("limits", {})
        memory_limit = resource_amount("memory", limits["memory"]) if "memory" in limits else None
        cores = math.ceil(resource_amount("cpu", limits["cpu"]) / 1000) if "cpu" in limits else 0
        gpus = requirements.requests.get(GPU_RESOURCE, 0)
        unknown = [r for r in requirements.requests if r not in ("cpu", "memory", GPU_RESOURCE)]
        if unknown:
            raise InvalidValueError(
                "resources",
                unknown[0],
                f"this machine offers cpu, memory and {GPU_RESOURCE}",
                "with_limits(gpus=1)",
            )
        run_dir = self.home / "runs" / run.uid
        mounts = self._mounts(spec, run_dir)
        env = self._environment(container.get("env", []), run)
        return _Prepared(run, requirements, env, mounts, memory_limit, cores, gpus, run_dir)

    def _volume_source(self, volume: dict[str, Any]) -> tuple[str, Path]:
        volumes = self.settings.local.volumes
        if "persistentVolumeClaim" in volume:
            name = volume["persistentVolumeClaim"]["claimName"]
        elif "configMap" in volume:
            name = volume["configMap"]["name"]
        elif "secret" in volume:
            name = volume["secret"]["secretName"]
            if name not in volumes:
                return name, self.home / "secrets" / name
        else:
            name = volume["name"]
        if name not in volumes:
            raise NotFoundError(
                f"volume {volume['name']!r}: {name!r} has no local directory; map it in the "
                f"configuration (local.volumes: {{{name}: {{path: /some/dir}}}}, or "
                f'RUNPLANE_LOCAL__VOLUMES=\'{{"{name}": {{"path": "/some/dir"}}}}\')'
            )
        return name, volumes[name].path

    def _mounts(self, spec: dict[str, Any], run_dir: Path) -> dict[str, str]:
        sources = {v["name"]: self._volume_source(v) for v in spec.get("volumes", [])}
        mounts = {}
        for mount in spec["containers"][0].get("volumeMounts", []):
            name, path = sources[mount["name"]]
            if not path.is_dir():
                raise NotFoundError(
                    f"volume {mount['name']!r}: the local directory {str(path)!r} for {name!r} "
                    "does not exist"
                )
            mounts[mount["mountPath"]] = str(path / mount.get("subPath", ""))
        return mounts

    def _secret(self, name: str, key: str) -> str:
        path = self.home / "secrets" / name / key
        if not path.is_file():
            raise NotFoundError(
                f"secret {name!r} key {key!r} is not in the local secret store; create "
                f"{path} (the store is {self.home / 'secrets'}/<secret>/<key>)"
            )
        return path.read_text(encoding="utf-8")

    def _environment(self, env: list[dict[str, Any]], run: RunRequest) -> dict[str, str]:
        values: dict[str, str] = {}
        for item in env:
            if "value" in item:
                values[item["name"]] = item["value"]
                continue
            source = item["valueFrom"]
            if "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                values[item["name"]] = self._secret(ref["name"], ref["key"])
            elif "configMapKeyRef" in source:
                ref = source["configMapKeyRef"]
                directory = self.settings.local.volumes.get(ref["name"])
                if directory is None or not (directory.path / ref["key"]).is_file():
                    raise NotFoundError(
                        f"env {item['name']}: ConfigMap {ref['name']!r} key {ref['key']!r} has "
                        "no local file; map the ConfigMap in local.volumes"
                    )
                values[item["name"]] = (directory.path / ref["key"]).read_text(encoding="utf-8")
            elif source.get("fieldRef", {}).get("fieldPath") == "metadata.name":
                values[item["name"]] = f"{run.function}-{run.uid[:16]}-{run.attempt}"
            elif source.get("fieldRef", {}).get("fieldPath") == "spec.nodeName":
                values[item["name"]] = self.node.name
            else:
                raise InvalidValueError(
                    f"env {item['name']}",
                    source,
                    "locally, valueFrom supports secretKeyRef, "
                    "configMapKeyRef, and fieldRef metadata.name/spec.nodeName",
                )
        return values

    # -- submitting and scheduling --------------------------------------------------------

    def submit(self, prepared: _Prepared) -> None:
        """Queue a prepared run; it starts when the machine has room for it."""
        run = prepared.run
        prepared.run_dir.mkdir(parents=True, exist_ok=True)
        (prepared.run_dir / "work").mkdir(exist_ok=True)
        fit = evaluate(prepared.requirements, [self.node])
        if not fit.schedulable:
            prepared.never_fits = True
            prepared.message = (
                f"{fit.message} This run can never start here: "
                f"{_hint(prepared.requirements, self.node, fit.message)}."
            )
            with self._lock:
                self._waiting[run.uid] = prepared
            self._emit(run.uid, RunState.PENDING, "Unschedulable", prepared.message)
            return
        self._ledger.wait(
            Claim(
                run.uid,
                run.priority,
                run.submitted,
                prepared.requirements.requests,
                prepared.cores,
                prepared.gpus,
            )
        )
        with self._lock:
            self._waiting[run.uid] = prepared
        self._emit(run.uid, RunState.PENDING, "Pending", "waiting for capacity")
        self._wake.set()

    def _schedule(self) -> None:
        interval = max(self.settings.local.poll_interval * 2, 0.02)
        while not self._closed:
            self._wake.wait(interval)
            self._wake.clear()
            with self._lock:
                mine = [uid for uid, p in self._waiting.items() if not p.never_fits]
            if not mine:
                continue
            try:
                grants = self._ledger.grant(mine)
            except Exception as error:  # the ledger is shared; report and retry next tick
                print(f"runplane: capacity ledger error: {error}", file=sys.stderr)
                continue
            for grant in grants:
                self._start(grant)
            self._explain_waiting()

    def _explain_waiting(self) -> None:
        with self._lock:
            waiting = [p for p in self._waiting.values() if not p.never_fits]
        if not waiting:
            return
        occupied = self._ledger.occupied()
        for prepared in waiting:
            fit = evaluate(prepared.requirements, [occupied])
            message = fit.message if not fit.schedulable else "waiting behind higher-priority runs"
            if message != prepared.message:
                prepared.message = message
                self._emit(prepared.run.uid, RunState.PENDING, "Unschedulable", message)

    def _start(self, grant: Grant) -> None:
        with self._lock:
            prepared = self._waiting.pop(grant.uid, None)
            if prepared is None:
                self._ledger.release(grant.uid)
                return
            self._running[grant.uid] = prepared
        prepared.thread = threading.Thread(
            target=self._supervise,
            args=(prepared, grant),
            name=f"runplane-run-{grant.uid[:8]}",
            daemon=True,
        )
        prepared.thread.start()

    # -- supervising ----------------------------------------------------------------------

    def _spawn(self, prepared: _Prepared, grant: Grant) -> subprocess.Popen[bytes]:
        run = prepared.run
        spec = {
            "uid": run.uid,
            "project": run.project,
            "function": run.function,
            "handler": run.handler,
            "takes_context": run.takes_context,
            "code": run.code,
            "filename": run.filename,
            "module": Path(run.filename).stem.replace("-", "_") or "handler",
            "params": run.params,
            "inputs": run.inputs,
            "mounts": prepared.mounts,
            "source_dir": run.source_dir,
            "cpu_ids": list(grant.cpu_ids) if prepared.cores else [],
            "executor_pid": os.getpid(),
        }
        (prepared.run_dir / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        work = prepared.run_dir / "work"
        for mount_path, local in prepared.mounts.items():
            link = work / mount_path.lstrip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                link.symlink_to(local)
        env = {
            **os.environ,
            **prepared.env,
            "RUNPLANE_MOUNTS": json.dumps(prepared.mounts),
            "CUDA_VISIBLE_DEVICES": ",".join(grant.gpu_ids),
            "NVIDIA_VISIBLE_DEVICES": ",".join(grant.gpu_ids) or "void",
            "PYTHONUNBUFFERED": "1",
        }
        log = (prepared.run_dir / "output.log").open("ab")
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "runplane.runtimes.local.child", str(prepared.run_dir)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=work,
                start_new_session=True,
            )
        finally:
            log.close()

    def _supervise(self, prepared: _Prepared, grant: Grant) -> None:
        run = prepared.run
        peak = 0
        reason, message, exit_code, cpu_seconds = "", "", None, 0.0
        try:
            if prepared.abort is not None:
                self._finish_aborted(prepared, 0, 0.0)
                return
            process = prepared.process = self._spawn(prepared, grant)
            self._emit(
                run.uid,
                RunState.RUNNING,
                "Started",
                f"process {process.pid} on {self.node.name}",
                process_id=process.pid,
            )
            interval = self.settings.local.poll_interval
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    process.returncode = os.waitstatus_to_exitcode(status)
                    cpu_seconds = usage.ru_utime + usage.ru_stime
                    peak = max(peak, usage.ru_maxrss * 1024)
                    break
                rss = _tree_rss(self._processes, process.pid)
                peak = max(peak, rss)
                if prepared.memory_limit is not None and rss > prepared.memory_limit:
                    _kill_tree(self._processes, process.pid)
                    reason = "OOMKilled"
                    message = (
                        f"memory use {_mebibytes(rss)} exceeded the limit "
                        f"{_mebibytes(prepared.memory_limit)}; the run was killed"
                    )
                elif prepared.abort is not None and not reason:
                    _kill_tree(self._processes, process.pid)
                    reason = "Aborted"
                time.sleep(interval)
            if reason == "Aborted":
                self._finish_aborted(prepared, peak, cpu_seconds)
                return
            returncode = process.returncode
            exit_code = 128 - returncode if returncode < 0 else returncode
            if reason == "OOMKilled":
                exit_code = OOM_EXIT_CODE
            results, artifacts, error = _read_events(prepared.run_dir)
            if exit_code == 0:
                state, reason, message = RunState.COMPLETED, "Completed", ""
            else:
                state = RunState.ERROR
                if not reason:
                    reason = "Error" if returncode >= 0 else signal.Signals(-returncode).name
                    message = error or f"the process exited with code {exit_code}"
            self._emit(
                run.uid,
                state,
                reason,
                message,
                process_id=process.pid,
                exit_code=exit_code,
                usage=Usage(peak, cpu_seconds),
                results=results,
                artifacts=artifacts,
            )
        except Exception as error:  # a supervisor bug must not leave the run hanging
            self._emit(run.uid, RunState.ERROR, "ExecutorError", f"{type(error).__name__}: {error}")
        finally:
            self._ledger.release(run.uid)
            with self._lock:
                self._running.pop(run.uid, None)
            prepared.done.set()
            self._wake.set()

    def _finish_aborted(self, prepared: _Prepared, peak: int, cpu_seconds: float) -> None:
        reason, message = prepared.abort or ("Aborted", "")
        results, artifacts, _ = _read_events(prepared.run_dir)
        process_id = prepared.process.pid if prepared.process else None
        exit_code = OOM_EXIT_CODE if prepared.process else None
        self._emit(
            prepared.run.uid,
            RunState.ABORTED,
            reason,
            message,
            process_id=process_id,
            exit_code=exit_code,
            usage=Usage(peak, cpu_seconds),
            results=results,
            artifacts=artifacts,
        )

    # -- aborting -------------------------------------------------------------------------

    def abort(self, uid: str, reason: str = "Aborted", message: str = "") -> bool:
        """Stop a waiting or running run; ``False`` if this runtime does not hold it."""
        with self._lock:
            waiting = self._waiting.pop(uid, None)
            running = self._running.get(uid)
        if waiting is not None:
            self._ledger.release(uid)
            self._emit(uid, RunState.ABORTED, reason, message)
            waiting.done.set()
            return True
        if running is None:
            return False
        if running.abort is None:
            running.abort = (reason, message)
            self._emit(uid, RunState.ABORTING, reason, message)
        return True

    def wait(self, uid: str, timeout: float | None = None) -> bool:
        with self._lock:
            prepared = self._waiting.get(uid) or self._running.get(uid)
        return True if prepared is None else prepared.done.wait(timeout)

    def close(self) -> None:
        """Abort what is still here and stop the scheduler."""
        with self._lock:
            uids = [*self._waiting, *self._running]
        for uid in uids:
            self.abort(uid, "Aborted", "the runplane process that owned the run exited")
        for uid in uids:
            self.wait(uid, timeout=10)
        self._closed = True
        self._wake.set()

    def _emit(self, uid: str, state: RunState, reason: str, message: str, **extra: Any) -> None:
        # Locally a run waits for capacity (never "scheduled but not started") and pulls no
        # image, so two of the four threshold conditions apply.
        condition = _CONDITIONS.get(state, "")
        self._listener(
            RunEvent(
                uid=uid,
                state=state,
                condition=condition,
                reason=reason,
                message=message,
                node=self.node.name,
                **extra,
            )
        )


class _ProcessTable:
    """Who is whose child, from one scan of the process table shared by every supervisor.

    Finding a run's descendants means reading every process's parent; with many runs at once,
    one scan per tick for all of them is far cheaper than one scan per run.
    """

    def __init__(self, max_age: float) -> None:
        self._max_age = max_age
        self._lock = threading.Lock()
        self._built = 0.0
        self._children: dict[int, list[int]] = {}

    def tree(self, root: int) -> list[int]:
        with self._lock:
            now = time.monotonic()
            if now - self._built > self._max_age:
                children: dict[int, list[int]] = {}
                for process in psutil.process_iter(["ppid"]):
                    parent = process.info["ppid"]
                    if parent:
                        children.setdefault(parent, []).append(process.pid)
                self._children, self._built = children, now
            members, stack = [], [root]
            while stack:
                pid = stack.pop()
                members.append(pid)
                stack.extend(self._children.get(pid, ()))
            return members


def _tree_rss(table: _ProcessTable, root: int) -> int:
    total = 0
    for pid in table.tree(root):
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue
    return total


def _kill_tree(table: _ProcessTable, pid: int) -> None:
    members = table.tree(pid)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)  # the run is a session leader: its group goes at once
    for member in members:
        with contextlib.suppress(OSError):
            os.kill(member, signal.SIGKILL)


def _mebibytes(amount: int) -> str:
    return f"{amount / 2**20:.0f}Mi"


def _read_events(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    results: dict[str, Any] = {}
    artifacts: list[dict[str, Any]] = []
    error = ""
    path = run_dir / "events.jsonl"
    if not path.exists():
        return results, artifacts, error
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill
        if event.get("type") == "result":
            results[event["key"]] = event["value"]
        elif event.get("type") == "artifact":
            artifacts.append({k: event[k] for k in ("key", "path", "size")})
        elif event.get("type") == "error":
            error = event["message"]
    return results, artifacts, error

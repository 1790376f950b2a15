"""Serving functions deployed on this machine: start, find, list and delete deployments.

A rendered Deployment becomes a supervisor process (:mod:`runplane.runtimes.local.replicas`)
that keeps its replicas running behind one local port. Each deployment lives in
``<home>/deployments/<project>/<name>/``: the manifests it was deployed from, the supervisor's
``status.json`` and log, and each replica's output. A deployment outlives the process that
made it, as a Deployment outlives ``kubectl apply``; ``delete`` ends it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil

from runplane import names
from runplane.config import Settings
from runplane.errors import ConflictError, InvalidValueError, NotFoundError, RunplaneError
from runplane.placement import evaluate
from runplane.runtimes.contract import Answer, Call
from runplane.runtimes.deployments import DeploymentState
from runplane.runtimes.local.detached import start_module
from runplane.runtimes.local.launch import INHERITED, plan
from runplane.runtimes.local.node import local_node
from runplane.runtimes.local.replicas import replica_request
from runplane.runtimes.output import OUTPUT, private_dir

STATUS = "status.json"
SUPERVISOR_LOG = "supervisor.log"
#: What of the settings a supervisor needs; the service's own (tokens, database) stay out.
_SETTINGS_EXCLUDED = {"service", "api", "token"}


class DeployError(RunplaneError):
    """A deployment that did not become ready; the message says why."""

    http_status = 422


def deployments_root(settings: Settings) -> Path:
    return settings.local.home / "deployments"


def _directory(settings: Settings, project: str, name: str) -> Path:
    return deployments_root(settings) / project / name


def _deployment(manifests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    for manifest in manifests:
        if manifest.get("kind") == "Deployment":
            return manifest
    raise InvalidValueError(
        "manifests",
        [m.get("kind") for m in manifests],
        "a serving function renders a Deployment; deploy functions of kind 'serving'",
        "new_function('serve', kind='serving')",
    )


def check(settings: Settings, manifests: Sequence[Mapping[str, Any]]) -> None:
    """Refuse what could never run here, before anything starts: an unmapped volume, a
    missing secret, requests this machine can never hold."""
    listed = [dict(m) for m in manifests]
    _deployment(listed)
    node = local_node(settings)
    run = plan(replica_request(listed, settings, 0), settings, node.name)
    fit = evaluate(run.requirements, [node])
    if not fit.schedulable:
        raise ConflictError(
            "resources", f"a replica can never start on this machine: {fit.message}"
        )


def _read_status(directory: Path) -> dict[str, Any] | None:
    try:
        status: dict[str, Any] = json.loads((directory / STATUS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return status


def _alive(status: Mapping[str, Any]) -> bool:
    try:
        process = psutil.Process(status["supervisor"])
        return bool(
            abs(process.create_time() - status["supervisor_started"]) < 1e-3
            and process.status() != psutil.STATUS_ZOMBIE
        )
    except (psutil.Error, KeyError):
        return False


def _stop(directory: Path, timeout: float = 30.0) -> None:
    """End the deployment's supervisor, which stops its replicas first."""
    status = _read_status(directory)
    if status is None or not _alive(status):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(status["supervisor"], signal.SIGTERM)
    with contextlib.suppress(psutil.Error):
        psutil.Process(status["supervisor"]).wait(timeout)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def deploy(settings: Settings, manifests: Sequence[Mapping[str, Any]]) -> list[str]:
    """Start (or restart, keeping its port) the deployment ``manifests`` render, and wait
    until every replica answers; a deployment that does not get there is stopped and
    removed, and the error says why, with the failing replica's output."""
    check(settings, manifests)
    listed = [dict(m) for m in manifests]
    deployment = _deployment(listed)
    name = deployment["metadata"]["name"]
    project = deployment["metadata"]["labels"][names.PROJECT]
    directory = _directory(settings, project, name)
    previous = _read_status(directory)
    host = settings.serving.local_host
    port = _port_of(previous) or _free_port(host)
    _stop(directory)
    if directory.exists():
        shutil.rmtree(directory)
    private_dir(directory)
    _write(directory / "manifests.json", listed)
    _write(directory / "options.json", {"host": host, "port": port})
    _write(
        directory / "settings.json", settings.model_dump(mode="json", exclude=_SETTINGS_EXCLUDED)
    )
    inherited = (*INHERITED, *settings.local.inherit_env)
    env = {key: os.environ[key] for key in inherited if key in os.environ}
    env["RUNPLANE_CONFIG"] = os.devnull  # the settings are the deployer's, in settings.json
    supervisor = start_module(
        "runplane.runtimes.local.replicas", directory, directory / SUPERVISOR_LOG, env, directory
    )
    try:
        status = _wait_ready(directory, supervisor, settings.serving.ready_timeout)
    except DeployError:
        _stop(directory)
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return [f"Deployment/{name}: {status['desired']} replica(s) at {status['url']}"]


def _port_of(status: Mapping[str, Any] | None) -> int | None:
    if not status:
        return None
    return int(str(status["url"]).rsplit(":", 1)[1])


def _write(path: Path, data: Any) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(data, file)


def _wait_ready(
    directory: Path, supervisor: subprocess.Popen[bytes], timeout: float
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = _read_status(directory)
        if status and status["state"] == DeploymentState.READY:
            return status
        if (supervisor.poll() and not status) or (status and not _alive(status)):
            raise DeployError(
                "the deployment's supervisor stopped:\n" + _tail(directory / SUPERVISOR_LOG)
            )
        if not status and "Traceback" in _tail(directory / SUPERVISOR_LOG):
            raise DeployError(
                "the deployment's supervisor failed:\n" + _tail(directory / SUPERVISOR_LOG)
            )
        failing = [r for r in (status or {}).get("replicas", []) if r["restarts"]]
        if failing:
            replica = failing[0]
            raise DeployError(
                f"replica {replica['index']} failed before it was ready "
                f"({replica['last_exit']}); its output:\n"
                + _tail(directory / f"replica-{replica['index']}" / OUTPUT)
            )
        if time.monotonic() >= deadline:
            waiting = [
                f"replica {r['index']}: {r['state']} ({r['message']})"
                for r in (status or {}).get("replicas", [])
                if r["state"] != "ready"
            ]
            raise DeployError(
                f"the deployment was not ready within {timeout:g} s (serving.ready_timeout): "
                + "; ".join(waiting or ["no status yet"])
            )
        time.sleep(0.1)


def list_deployments(settings: Settings) -> list[dict[str, Any]]:
    """Every deployment on this machine, as its supervisor last described it (``state``
    ``stopped`` when its supervisor is gone)."""
    found = []
    root = deployments_root(settings)
    for status_file in sorted(root.glob(f"*/*/{STATUS}")) if root.is_dir() else []:
        status = _read_status(status_file.parent)
        if status is None:
            continue
        if not _alive(status):
            status = {**status, "state": DeploymentState.STOPPED, "ready": 0, "replicas": []}
        found.append({**status, "owner": _owner(status_file.parent)})
    return found


def _owner(directory: Path) -> str:
    """Who deployed it through the service (the Deployment's annotation), else ``""``."""
    try:
        manifests = json.loads((directory / "manifests.json").read_text(encoding="utf-8"))
        annotations = _deployment(manifests)["metadata"].get("annotations") or {}
    except (OSError, ValueError, KeyError, ConflictError, InvalidValueError):
        return ""
    return str(annotations.get(names.DEPLOYED_BY, ""))


def forward(settings: Settings, project: str, name: str, call: Call) -> Answer:
    """``call`` sent to the deployment's port; its answer, or ``502`` when none comes."""
    url = address(settings, project, name) + "/" + call.path.lstrip("/")
    try:
        answer = httpx.request(
            call.method,
            url,
            content=call.body or None,
            headers=dict(call.headers),
            timeout=call.timeout,
        )
    except httpx.HTTPError as error:
        return Answer(502, "text/plain", f"no answer from {project}/{name}: {error}".encode())
    return Answer(answer.status_code, answer.headers.get("content-type", ""), answer.content)


def _matching(settings: Settings, name: str, project: str | None) -> list[Path]:
    root = deployments_root(settings)
    pattern = f"{project or '*'}/{name}"
    return sorted(path for path in root.glob(pattern) if path.is_dir()) if root.is_dir() else []


def delete(settings: Settings, name: str, project: str | None = None) -> str:
    """Stop the deployment ``name`` and remove it; returns ``project/name``."""
    matches = _matching(settings, name, project)
    if not matches:
        raise NotFoundError(
            f"deployment {name!r}"
            + (f" in project {project!r}" if project else "")
            + " does not exist here (runplane get deployments lists them)"
        )
    if len(matches) > 1:
        projects = ", ".join(path.parent.name for path in matches)
        raise InvalidValueError(
            "project",
            None,
            f"deployments named {name!r} exist in projects {projects}; name one",
            f"runplane delete deployment {name} --project {matches[0].parent.name}",
        )
    (directory,) = matches
    _stop(directory)
    shutil.rmtree(directory, ignore_errors=True)
    return f"{directory.parent.name}/{name}"


def address(settings: Settings, project: str, name: str) -> str:
    """The URL of a running deployment of this machine."""
    status = _read_status(_directory(settings, project, name))
    if status is None or not _alive(status):
        raise NotFoundError(
            f"function {project}/{name} is not deployed here; deploy it first (fn.deploy())"
        )
    return str(status["url"])

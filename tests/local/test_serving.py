"""Serving functions on this machine: real replica processes behind one port, restarted when
they die, scaled by the autoscaler's rule, managed from the SDK and the CLI."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

import runplane
from runplane.cli.exits import ExitCode
from runplane.client.serving import InvokeError
from runplane.config import Settings
from runplane.errors import NotFoundError
from runplane.runtimes.local import serving
from runplane.runtimes.local.serving import DeployError
from runplane.spec import Function

ECHO = """
import os, time

def init_context(context):
    context.user_data.greeting = "hello"

def handler(context, event):
    if event.path == "/sleep":
        time.sleep(event.body["seconds"])
    if event.path == "/fail":
        raise ValueError("asked to fail")
    if event.path == "/status":
        return context.Response(body="made", status_code=201, content_type="text/plain")
    if event.path == "/burn":
        end = time.time() + event.body["seconds"]
        while time.time() < end:
            pass
    return {"pid": os.getpid(), "path": event.path, "method": event.method,
            "body": event.body if not isinstance(event.body, bytes) else event.body.decode(),
            "greeting": context.user_data.greeting, "query": event.fields}
"""


@pytest.fixture
def deployed(settings: Settings) -> Iterator[list[Function]]:
    """Functions a test deploys; whatever is left is deleted, its processes with it."""
    functions: list[Function] = []
    yield functions
    for fn in functions:
        with contextlib.suppress(NotFoundError):
            serving.delete(settings, fn.metadata.name, fn.metadata.project)


def _status(settings: Settings, name: str) -> dict[str, Any]:
    (status,) = [s for s in serving.list_deployments(settings) if s["name"] == name]
    return status


def _wait(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_two_replicas_answer_200_concurrent_requests_and_a_killed_one_comes_back(
    make_function: Callable[..., Function], settings: Settings, deployed: list[Function]
):
    fn = make_function(ECHO, name="echo", kind="nuclio")  # MLRun's name for it
    fn.spec.replicas = 2
    fn.with_http(workers=4).with_requests(cpu="100m", mem="64Mi").with_limits(mem="512Mi")
    deployed.append(fn)
    answer = fn.deploy()
    assert answer["namespace"] == "local"
    assert answer["applied"] == [f"Deployment/echo: 2 replica(s) at {answer['url']}"]

    answered = fn.invoke("/x", body={"a": 1})
    assert answered == {
        "pid": answered["pid"],
        "path": "/x",
        "method": "POST",
        "body": {"a": 1},
        "greeting": "hello",
        "query": {},
    }
    assert fn.invoke("/q?k=v", method="GET")["query"] == {"k": "v"}
    assert fn.invoke("/status") == b"made"
    with pytest.raises(InvokeError, match="500.*ValueError: asked to fail"):
        fn.invoke("/fail")

    async def storm() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            return await asyncio.gather(
                *[client.post(answer["url"] + "/sleep", json={"seconds": 0.1}) for _ in range(200)]
            )

    started = time.monotonic()
    responses = asyncio.run(storm())
    elapsed = time.monotonic() - started
    assert [r.status_code for r in responses] == [200] * 200
    by_replica = collections.Counter(r.json()["pid"] for r in responses)
    replicas = {r["pid"] for r in _status(settings, "echo")["replicas"]}
    assert len(replicas) == 2
    assert set(by_replica) == replicas  # both replicas served
    # 200 calls of 0.1 s on 2 replicas x 4 workers take at least 2.5 s; far less than serial.
    assert 2.5 <= elapsed < 15, elapsed

    # Deploying again replaces the replicas and keeps the address.
    assert fn.deploy()["url"] == answer["url"]
    replicas = {r["pid"] for r in _status(settings, "echo")["replicas"]}
    assert len(replicas) == 2
    victim = min(replicas)
    os.kill(victim, signal.SIGKILL)
    _wait(
        lambda: (
            (s := _status(settings, "echo"))["state"] == "ready"
            and victim not in {r["pid"] for r in s["replicas"]}
        )
    )
    status = _status(settings, "echo")
    restarted = [r for r in status["replicas"] if r["restarts"] == 1]
    assert len(restarted) == 1
    assert restarted[0]["last_exit"] == "Error, exit code 137"
    assert len({fn.invoke("/after")["pid"] for _ in range(20)} - {victim}) >= 1

    listing = subprocess.run(
        [sys.executable, "-m", "runplane.cli.main", "get", "deployments"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "echo" in listing.stdout
    assert "2/2" in listing.stdout
    pids = [r["pid"] for r in status["replicas"]]
    supervisor = status["supervisor"]
    deleted = subprocess.run(
        [sys.executable, "-m", "runplane.cli.main", "delete", "deployment", "echo"],
        capture_output=True,
        text=True,
    )
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "default/echo deleted"
    assert not any(psutil.pid_exists(pid) for pid in [*pids, supervisor])
    with pytest.raises(Exception, match="not deployed here"):
        fn.invoke("/gone")


def test_a_replica_over_its_memory_limit_is_killed_and_restarted(
    make_function: Callable[..., Function], settings: Settings, deployed: list[Function]
):
    code = """
    def handler(context, event):
        context.user_data.hog = bytearray(400 * 2**20)
        return "allocated"
    """
    fn = make_function(code, name="hog", kind="serving")
    fn.with_limits(mem="200Mi").with_requests(mem="100Mi")
    deployed.append(fn)
    fn.deploy()
    # The replica is killed answering or just after (the limit is watched every 0.2 s).
    with contextlib.suppress(InvokeError):
        fn.invoke("/")
    _wait(lambda: _status(settings, "hog")["replicas"][0]["restarts"] >= 1)
    assert _status(settings, "hog")["replicas"][0]["last_exit"].startswith("OOMKilled")
    _wait(lambda: _status(settings, "hog")["state"] == "ready")


def test_load_scales_replicas_up_by_the_autoscaler_rule(
    make_function: Callable[..., Function],
    settings: Settings,
    deployed: list[Function],
    monkeypatch: pytest.MonkeyPatch,
):
    from runplane import config

    monkeypatch.setenv("RUNPLANE_SERVING__SCALE_INTERVAL", "1")
    config.current.cache_clear()
    fn = make_function(ECHO, name="scaled", kind="serving")
    fn.spec.min_replicas, fn.spec.max_replicas = 1, 2
    fn.with_requests(cpu="200m").with_http(workers=2)
    deployed.append(fn)
    url = fn.deploy()["url"]
    assert _status(settings, "scaled")["desired"] == 1

    # Workers burning CPU: one core or more, 500% of a 200m request, far above the 75% target.
    burners = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import httpx; httpx.post(%r, json={'seconds': 8}, timeout=30)" % (url + "/burn"),
            ]
        )
        for _ in range(2)
    ]
    try:
        _wait(lambda: _status(settings, "scaled")["desired"] == 2, timeout=20)
        status = _status(settings, "scaled")
        assert "against a target of 75%: 1 -> 2 replica(s)" in status["scaling"]
        _wait(lambda: _status(settings, "scaled")["state"] == "ready", timeout=20)
    finally:
        for burner in burners:
            burner.wait(30)


def test_a_handler_that_cannot_load_fails_the_deploy_and_leaves_nothing(
    make_function: Callable[..., Function], settings: Settings, deployed: list[Function]
):
    code = """
    def init_context(context):
        raise RuntimeError("no model file")

    def handler(context, event):
        return "never"
    """
    fn = make_function(code, name="broken", kind="serving")
    deployed.append(fn)
    with pytest.raises(DeployError, match="(?s)replica 0 failed before it was ready.*no model"):
        fn.deploy()
    assert serving.list_deployments(settings) == []


def test_what_can_never_run_here_is_refused_before_anything_starts(
    make_function: Callable[..., Function], settings: Settings
):
    fn = make_function(ECHO, name="huge", kind="serving").with_requests(cpu="64")
    with pytest.raises(Exception, match="Insufficient cpu"):
        fn.deploy()
    job = make_function(ECHO, name="ajob")
    assert job.deploy() is True  # as MLRun answers: a job is ready as it is, nothing started
    codeless = runplane.new_function("codeless", kind="serving")
    with pytest.raises(Exception, match="needs its code embedded and the handler"):
        codeless.deploy()
    assert not (Path(settings.local.home) / "deployments").exists() or not list(
        (Path(settings.local.home) / "deployments").rglob("status.json")
    )


def test_get_and_delete_speak_clearly(settings: Settings):
    listing = subprocess.run(
        [sys.executable, "-m", "runplane.cli.main", "get", "deployments", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(listing.stdout) == []
    missing = subprocess.run(
        [sys.executable, "-m", "runplane.cli.main", "delete", "deployment", "nope"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == ExitCode.NOT_FOUND
    assert "deployment 'nope' does not exist here" in missing.stderr

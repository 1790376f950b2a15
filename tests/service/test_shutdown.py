"""``runplane serve`` stopped with SIGTERM: runs under way get a grace period, queued runs wait
for the next start and run then, and every record says what happened."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import runplane
from testbed import serve

TOKEN = "shutdown-suite-token-0123"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
SLEEPER = "import time\n\ndef handler(context, seconds: float = 1):\n    time.sleep(seconds)\n"


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    return env | {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(tmp_path / "home"),
        "RUNPLANE_LOCAL__RUN_USERS": "same",  # users of their own: test_run_users.py
        "RUNPLANE_LOCAL__CPU": "2",
        "RUNPLANE_LOCAL__INHERIT_ENV": '["COVERAGE_PROCESS_CONFIG"]',
        "RUNPLANE_SERVICE__TOKENS": json.dumps([{"token": TOKEN, "user": "ops"}]),
    }


def whole_machine(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    fn = runplane.code_to_function(
        "sleeper", filename=str(tmp_path / "sleeper.py"), handler="handler"
    )
    return fn.with_requests(cpu=2).to_dict()


def submit(url: str, function: dict[str, Any], seconds: float) -> str:
    body = {"function": function, "params": {"seconds": seconds}}
    return str(httpx.post(f"{url}/api/v1/runs", headers=HEADERS, json=body).json()["uid"])


def run(url: str, uid: str) -> dict[str, Any]:
    return httpx.get(f"{url}/api/v1/runs/{uid}", headers=HEADERS).json()  # type: ignore[no-any-return]


def wait(url: str, uid: str, predicate: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not predicate(record := run(url, uid)):
        assert time.monotonic() < deadline, record
        time.sleep(0.1)
    return record


def stop(process: Any) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal


def test_runs_finish_within_the_grace_and_the_queue_survives_a_restart(environment, tmp_path):
    environment["RUNPLANE_SERVICE__SHUTDOWN_GRACE"] = "30"
    process, url = serve.start_service(environment, tmp_path / "first.log")
    function = whole_machine(tmp_path)
    running = submit(url, function, 3)
    wait(url, running, lambda r: r["state"] == "running")
    queued = submit(url, function, 0.1)
    wait(url, queued, lambda r: r["reason"] == "Unschedulable")  # waiting behind the first
    stop(process)

    process, url = serve.start_service(environment, tmp_path / "second.log")
    try:
        finished = run(url, running)
        assert finished["state"] == "completed", finished  # it had its grace period
        requeued = run(url, queued)
        assert [t["state"] for t in requeued["transitions"]][:2] == ["created", "pending"]
        done = wait(url, queued, lambda r: r["state"] in ("completed", "error", "aborted"))
        assert done["state"] == "completed", done
        assert done["attempts"][0]["process_id"]
    finally:
        stop(process)


def test_runs_past_the_grace_are_aborted_saying_so(environment, tmp_path):
    environment["RUNPLANE_SERVICE__SHUTDOWN_GRACE"] = "1"
    process, url = serve.start_service(environment, tmp_path / "service.log")
    uid = submit(url, whole_machine(tmp_path), 60)
    wait(url, uid, lambda r: r["state"] == "running")
    began = time.monotonic()
    stop(process)
    assert time.monotonic() - began < 30
    process, url = serve.start_service(environment, tmp_path / "again.log")
    try:
        record = run(url, uid)
        assert record["state"] == "aborted"
        assert record["status_text"] == (
            "the runplane process that owned the run exited (after waiting 1 s for it to finish)"
        )
    finally:
        stop(process)

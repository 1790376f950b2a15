"""Retries through the service on the embedded default: a run killed for memory completes with
more, an abort is never retried, a threshold's or the spot fallback's stop is, and a service
killed between attempts neither loses nor repeats one."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import runplane
from testbed import serve
from tests.service.conftest import USER, wait_state

ENDED = {"completed", "error", "aborted"}
HUNGRY = """\
import time

def handler(context, mib: int = 300):
    data = b"x" * (mib << 20)  # written, so every page is really used
    time.sleep(1)
    return {"held_mib": len(data) >> 20}
"""
SLEEPER = """\
import time

def handler(context, seconds: float = 60):
    time.sleep(seconds)
"""
#: Fails on its first attempt, sleeps on its second, records each attempt it runs in a file.
FLAKY = """\
import os
import time

def handler(context, ledger: str, first_sleep: float = 0, exit_code: int = 3):
    attempt = int(os.environ["RUNPLANE_ATTEMPT"])
    with open(ledger, "a") as out:
        out.write(f"{attempt}\\n")
    if attempt == 1:
        time.sleep(first_sleep)
        raise SystemExit(exit_code)
    return {"attempt": attempt}
"""


#: Checkpoints each step; its first attempt fails at ``fail_at``, the next resumes.
RESUMABLE = """\
import json

def handler(context, steps: int = 6, fail_at: int = 3):
    start = 0
    if context.last_checkpoint:
        with open(context.last_checkpoint) as saved:
            start = json.load(saved)["step"] + 1
    for step in range(start, steps):
        if context.attempt == 1 and step == fail_at:
            raise RuntimeError(f"induced failure at step {step}")
        context.save_checkpoint(f"step-{step:04d}", json.dumps({"step": step}))
    return {"resumed_from": start, "attempt": context.attempt}
"""


def function(tmp_path: Path, code: str, name: str = "job") -> runplane.Function:
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    fn = runplane.code_to_function(name, filename=str(path), handler="handler")
    return fn.with_requests(cpu="100m", mem="32Mi")


def submit(client: TestClient, fn: runplane.Function, **body: Any) -> str:
    answer = client.post("/api/v1/runs", headers=USER, json={"function": fn.to_dict(), **body})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["uid"])


def until(client: TestClient, uid: str, predicate: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not predicate(run := client.get(f"/api/v1/runs/{uid}", headers=USER).json()):
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    return run  # type: ignore[no-any-return]


def test_a_run_killed_for_memory_completes_with_more(client, tmp_path):
    fn = function(tmp_path, HUNGRY, "hungry").with_requests(cpu="100m", mem="128Mi")
    fn.with_limits(mem="128Mi").with_retries(5, on=["oom"], backoff=0)
    uid = submit(client, fn, params={"mib": 300})
    run = wait_state(client, uid, ENDED, timeout=120)
    assert run["state"] == "completed", run["status_text"]
    assert run["results"] == {"held_mib": 300, "return": {"held_mib": 300}}
    attempts = run["attempts"]
    assert [a["failure"] for a in attempts[:-1]] == ["oom"] * (len(attempts) - 1)
    assert attempts[0]["exit_code"] == 137
    assert attempts[0]["limits"]["memory"] == "128Mi"
    limits = [a["limits"]["memory"] for a in attempts]
    assert limits == ["128Mi", "192Mi", "288Mi", "432Mi"][: len(attempts)]
    assert int(limits[-1].removesuffix("Mi")) >= 300  # it completed with enough
    assert attempts[-1]["failure"] == ""
    assert attempts[-1]["reason"] == "Completed"
    for attempt in attempts[1:]:
        assert "(x1.5 after an OOM kill)" in attempt["adjustments"]
        assert attempt["requests"]["memory"] == attempt["limits"]["memory"]
        assert attempt["launched_at"] is not None
    assert [t["reason"] for t in run["transitions"]].count("Retrying") == len(attempts) - 1
    assert run["attempt"] == len(attempts)
    assert run["peak_memory_bytes"] >= 300 << 20


def test_an_aborted_run_is_never_retried(client, tmp_path):
    every = ["preempted", "node_lost", "oom", "image_pull", "unschedulable", "deadline", "error"]
    fn = function(tmp_path, SLEEPER, "sleeper").with_retries(5, on=every, backoff=0)
    uid = submit(client, fn)
    wait_state(client, uid, {"running"})
    assert client.post(f"/api/v1/runs/{uid}/abort", headers=USER).status_code == 200
    run = wait_state(client, uid, ENDED)
    assert (run["state"], run["reason"]) == ("aborted", "Aborted")
    (attempt,) = run["attempts"]
    assert attempt["failure"] == "aborted"
    assert run["retry_at"] is None


def test_an_abort_between_attempts_ends_the_run(client, tmp_path):
    ledger = tmp_path / "ledger"
    fn = function(tmp_path, FLAKY, "flaky").with_retries(3, on=["error"], backoff="1h")
    uid = submit(client, fn, params={"ledger": str(ledger)})
    waiting = until(client, uid, lambda r: r["reason"] == "Retrying")
    assert waiting["state"] == "pending"
    assert waiting["status_text"].startswith("attempt 2 of 3 starts in 1h00m: attempt 1 ")
    assert waiting["retry_at"] is not None
    assert client.post(f"/api/v1/runs/{uid}/abort", headers=USER).status_code == 200
    run = wait_state(client, uid, ENDED)
    assert (run["state"], run["reason"]) == ("aborted", "Aborted")
    assert [(a["number"], a["failure"]) for a in run["attempts"]] == [(1, "error"), (2, "aborted")]
    assert run["attempts"][0]["exit_code"] == 3
    assert run["attempts"][1]["started_at"] is None
    assert ledger.read_text() == "1\n"


def test_a_running_threshold_stop_is_retried_as_a_deadline(client, tmp_path):
    ledger = tmp_path / "ledger"
    fn = function(tmp_path, FLAKY, "slow").with_retries(2, on=["deadline"], backoff=0)
    uid = submit(
        client,
        fn,
        params={"ledger": str(ledger), "first_sleep": 60},
        state_thresholds={"running": "2s"},
    )
    run = wait_state(client, uid, ENDED)
    assert run["state"] == "completed", run["status_text"]
    assert run["results"] == {"attempt": 2, "return": {"attempt": 2}}
    first, second = run["attempts"]
    assert (first["failure"], first["reason"]) == ("deadline", "ThresholdExceeded")
    assert second["reason"] == "Completed"
    assert ledger.read_text() == "1\n2\n"


def test_a_run_that_waits_for_spot_here_falls_back_to_on_demand(client, tmp_path):
    """This machine is an on-demand node: a constrain-mode run can never start here, so the
    spot fallback's wait stops it and the next attempt runs in mode prevent."""
    fn = function(tmp_path, SLEEPER, "spotty").with_preemption_mode("constrain")
    fn.with_retries(2, backoff=0).with_spot_fallback(pending="1s")
    uid = submit(client, fn, params={"seconds": 0})
    run = wait_state(client, uid, ENDED)
    assert run["state"] == "completed", run["status_text"]
    first, second = run["attempts"]
    assert (first["failure"], first["reason"]) == ("unschedulable", "SpotUnavailable")
    assert first["started_at"] is None
    assert first["preemption_mode"] == "constrain"
    assert second["preemption_mode"] == "prevent"
    assert second["adjustments"].startswith("on-demand nodes (mode prevent): no spot node")
    assert second["spot"] is False


def test_a_failure_not_retried_says_why(client, tmp_path):
    ledger = tmp_path / "ledger"
    fn = function(tmp_path, FLAKY, "picky").with_retries(3, on=["oom"])
    uid = submit(client, fn, params={"ledger": str(ledger)})
    run = wait_state(client, uid, ENDED)
    assert run["state"] == "error"
    assert run["status_text"].endswith("(not retried: retry.on does not name error)")
    assert run["attempts"][0]["failure"] == "error"


@pytest.fixture
def service_environment(tmp_path: Path) -> dict[str, str]:
    token = "resilience-suite-token-01"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    return env | {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(tmp_path / "home"),
        "RUNPLANE_LOCAL__CPU": "2",
        "RUNPLANE_LOCAL__INHERIT_ENV": '["COVERAGE_PROCESS_CONFIG"]',
        "RUNPLANE_SERVICE__TOKENS": json.dumps([{"token": token, "user": "ops"}]),
    }


def test_a_service_killed_between_attempts_launches_the_next_once(service_environment, tmp_path):
    headers = {"Authorization": "Bearer resilience-suite-token-01"}
    ledger = tmp_path / "ledger"
    fn = function(tmp_path, FLAKY, "survivor").with_retries(3, on=["error"], backoff="3s")
    body = {"function": fn.to_dict(), "params": {"ledger": str(ledger)}}

    def get(url: str, uid: str) -> dict[str, Any]:
        return httpx.get(f"{url}/api/v1/runs/{uid}", headers=headers).json()  # type: ignore[no-any-return]

    process, url = serve.start_service(service_environment, tmp_path / "first.log")
    try:
        uid = httpx.post(f"{url}/api/v1/runs", headers=headers, json=body).json()["uid"]
        deadline = time.monotonic() + 60
        while (run := get(url, uid))["reason"] != "Retrying":
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    assert run["retry_at"] is not None  # decided and recorded; attempt 2 not launched
    assert ledger.read_text() == "1\n"

    process, url = serve.start_service(service_environment, tmp_path / "second.log")
    try:
        deadline = time.monotonic() + 60
        while (run := get(url, uid))["state"] not in ENDED:
            assert time.monotonic() < deadline, run
            time.sleep(0.1)
        assert run["state"] == "completed", run["status_text"]
        assert run["results"] == {"attempt": 2, "return": {"attempt": 2}}
        assert [(a["number"], a["failure"]) for a in run["attempts"]] == [(1, "error"), (2, "")]
        assert ledger.read_text() == "1\n2\n"  # attempt 2 ran once, attempt 1 never again
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_a_service_killed_mid_attempt_retries_the_attempt_it_lost(service_environment, tmp_path):
    headers = {"Authorization": "Bearer resilience-suite-token-01"}
    ledger = tmp_path / "ledger"
    fn = function(tmp_path, FLAKY, "orphan").with_retries(2, on=["node_lost"], backoff=0)
    body = {"function": fn.to_dict(), "params": {"ledger": str(ledger), "first_sleep": 600}}

    def get(url: str, uid: str) -> dict[str, Any]:
        return httpx.get(f"{url}/api/v1/runs/{uid}", headers=headers).json()  # type: ignore[no-any-return]

    process, url = serve.start_service(service_environment, tmp_path / "first.log")
    try:
        uid = httpx.post(f"{url}/api/v1/runs", headers=headers, json=body).json()["uid"]
        deadline = time.monotonic() + 60
        while get(url, uid)["state"] != "running" or not ledger.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)  # its run's process dies with it
        process.wait(timeout=10)

    process, url = serve.start_service(service_environment, tmp_path / "second.log")
    try:
        deadline = time.monotonic() + 60
        while (run := get(url, uid))["state"] not in ENDED:
            assert time.monotonic() < deadline, run
            time.sleep(0.1)
        assert run["state"] == "completed", run["status_text"]
        first, second = run["attempts"]
        assert (first["failure"], first["reason"]) == ("node_lost", "executor lost")
        assert second["reason"] == "Completed"
        assert ledger.read_text() == "1\n2\n"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_a_checkpointing_handler_resumes_after_a_failure(client, tmp_path):
    fn = function(tmp_path, RESUMABLE, "resumable").with_retries(2, on=["error"], backoff=0)
    uid = submit(client, fn)
    run = wait_state(client, uid, ENDED)
    assert run["state"] == "completed", run["status_text"]
    returned = {"resumed_from": 3, "attempt": 2}
    assert run["results"] == {**returned, "return": returned}
    first, second = run["attempts"]
    assert (first["failure"], first["exit_code"]) == ("error", 1)
    assert "induced failure at step 3" in first["message"]
    assert second["reason"] == "Completed"


#: Waits for its go file, then ends as told: a result, or a failure.
AT_THE_SIGNAL = """\
import os
import time

def handler(context, go: str, n: int = 0, fail: bool = False):
    while not os.path.exists(go):
        time.sleep(0.01)
    if fail:
        raise RuntimeError(f"run {n} failed on purpose")
    return {"n": n}
"""


def test_runs_that_ended_just_before_a_crash_keep_their_results(service_environment, tmp_path):
    """Runs end together and the service dies before it records any of those ends (stopped,
    then killed): the restarted service records each as the run left it, and only runs that
    were still executing are lost."""
    headers = {"Authorization": "Bearer resilience-suite-token-01"}
    go, never = tmp_path / "go", tmp_path / "never"
    fn = function(tmp_path, AT_THE_SIGNAL, "together").with_requests(cpu="10m", mem="16Mi")
    home = Path(service_environment["RUNPLANE_LOCAL__HOME"])

    def get(url: str, uid: str) -> dict[str, Any]:
        return httpx.get(f"{url}/api/v1/runs/{uid}", headers=headers).json()  # type: ignore[no-any-return]

    def submit_at(url: str, **params: Any) -> str:
        body = {"function": fn.to_dict(), "params": params}
        answer = httpx.post(f"{url}/api/v1/runs", headers=headers, json=body, timeout=30)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["uid"])

    def ended_alone(uid: str) -> bool:
        try:
            return b'"exit"' in (home / "runs" / uid / "events.jsonl").read_bytes()
        except FileNotFoundError:
            return False

    process, url = serve.start_service(service_environment, tmp_path / "first.log")
    try:
        finishing = [submit_at(url, go=str(go), n=n) for n in range(60)]
        failing = submit_at(url, go=str(go), n=60, fail=True)
        executing = [submit_at(url, go=str(never)) for _ in range(2)]
        deadline = time.monotonic() + 120
        for uid in [*finishing, failing, *executing]:
            while get(url, uid)["state"] != "running":
                assert time.monotonic() < deadline, get(url, uid)
                time.sleep(0.05)
        process.send_signal(signal.SIGSTOP)  # nothing it sees from now on is recorded
        go.touch()
        deadline = time.monotonic() + 120
        while not all(ended_alone(uid) for uid in [*finishing, failing]):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.send_signal(signal.SIGCONT)
        process.wait(timeout=10)

    process, url = serve.start_service(service_environment, tmp_path / "second.log")
    try:
        deadline = time.monotonic() + 60
        while any(get(url, uid)["state"] not in ENDED for uid in [*finishing, *executing]):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        for n, uid in enumerate(finishing):
            run = get(url, uid)
            assert (run["state"], run["results"]) == ("completed", {"n": n, "return": {"n": n}})
            assert run["attempts"][0]["exit_code"] == 0
        run = get(url, failing)
        assert (run["state"], run["reason"]) == ("error", "Error"), run
        assert "run 60 failed on purpose" in run["status_text"]
        assert run["attempts"][0]["exit_code"] == 1
        for uid in executing:
            run = get(url, uid)
            assert (run["state"], run["reason"]) == ("error", "executor lost"), run
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)

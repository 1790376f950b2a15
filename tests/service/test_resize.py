"""A person's resize of a running job through the API and the command line: its owner or an
admin only, refused with the reason where the run, its kind or the machine cannot, and
recorded on the run."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import runplane
from runplane.client import backend
from runplane.errors import ResizeRefusedError
from runplane.runs import RunState
from runplane.service import resizing
from runplane.spec.run_options import RunOptions
from tests.growing import GROWING
from tests.service.cli_service import USER as CLI_USER
from tests.service.cli_service import (  # noqa: F401 (fixtures)
    invoke,
    module_service,
    use_service,
)

from .conftest import ADMIN, OTHER_USER, USER, wait_state

MiB = 2**20


def _growing(tmp_path: Path) -> runplane.Function:
    path = tmp_path / "growing.py"
    path.write_text(GROWING)
    fn = runplane.code_to_function("growing", filename=str(path), handler="handler")
    return fn.with_requests(mem="64Mi", cpu="100m").with_limits(mem="128Mi")


def test_the_owner_resizes_a_running_job_and_others_may_not(
    client: TestClient, tmp_path: Path
) -> None:
    body = {"function": _growing(tmp_path).to_dict(), "params": {"room_wait": "120"}}
    uid = client.post("/api/v1/runs", headers=USER, json=body).json()["uid"]
    wait_state(client, uid, {"running"}, timeout=60)
    path = f"/api/v1/runs/{uid}/resize"
    assert client.post(path, headers=OTHER_USER, json={"mem": "512Mi"}).status_code == 403
    bad = client.post(path, headers=USER, json={"mem": "lots"})
    assert bad.status_code == 422
    assert bad.json()["message"].startswith("mem: 'lots' is not valid")
    assert client.post(path, headers=USER, json={}).status_code == 422
    assert client.post(path, headers=USER, json={"mem": "1Gi", "x": 1}).status_code == 422
    too_big = client.post(path, headers=USER, json={"mem": "64Gi"})
    assert too_big.status_code == 409
    assert "unreserved, less than" in too_big.json()["message"]
    done = client.post(path, headers=USER, json={"mem": "512Mi", "cpu": "1"})
    assert done.status_code == 200, done.text
    answer = done.json()
    assert (answer["memory_from"], answer["memory_to"]) == (128 * MiB, 512 * MiB)
    assert (answer["mode"], answer["by"], answer["outcome"]) == ("manual", "bob", "applied")
    run = wait_state(client, uid, {"completed", "error"}, timeout=240)
    assert run["state"] == "completed", run["status_text"]
    assert [a["number"] for a in run["attempts"]] == [1]
    assert [(r["mode"], r["memory_to"], r["cpu_to"]) for r in run["resizes"]] == [
        ("manual", 512 * MiB, 1000)
    ]
    listed = client.get("/api/v1/runs", headers=USER, params={"name": "growing"}).json()
    assert listed[0]["resizes"] == run["resizes"]
    ended = client.post(path, headers=ADMIN, json={"mem": "1Gi"})
    assert ended.status_code == 409
    assert ended.json()["message"] == (
        f"run {uid} has ended (completed); only a running run is resized"
    )


def test_an_admin_may_resize_anyones_run_and_a_missing_run_is_404(
    client: TestClient, tmp_path: Path
) -> None:
    body = {"function": _growing(tmp_path).to_dict(), "params": {"room_wait": "120"}}
    uid = client.post("/api/v1/runs", headers=USER, json=body).json()["uid"]
    wait_state(client, uid, {"running"}, timeout=60)
    done = client.post(f"/api/v1/runs/{uid}/resize", headers=ADMIN, json={"mem": "400Mi"})
    assert done.status_code == 200, done.text
    assert done.json()["by"] == "alice"
    missing = client.post(f"/api/v1/runs/{'0' * 32}/resize", headers=USER, json={"mem": "1Gi"})
    assert missing.status_code == 404
    client.post(f"/api/v1/runs/{uid}/abort", headers=USER)
    wait_state(client, uid, {"aborted", "completed"}, timeout=60)


def test_a_kind_of_several_processes_is_refused_before_the_runtime(tmp_path: Path) -> None:
    class Unused:
        def resize(self, *args: Any) -> None:
            raise AssertionError("the runtime is not asked")

    record = _record(RunState.RUNNING, {"kind": "mpijob"})
    with pytest.raises(ResizeRefusedError, match="is of kind mpijob, with several processes"):
        resizing.resize(Unused(), record, "1Gi", None, "bob")  # type: ignore[arg-type]
    waiting = _record(RunState.PENDING, {"kind": "job"})
    with pytest.raises(ResizeRefusedError, match="is pending, not running"):
        resizing.resize(Unused(), waiting, "1Gi", None, "bob")  # type: ignore[arg-type]


def _record(state: RunState, function: dict[str, Any]) -> Any:
    from dataclasses import replace

    from tests.unit.test_sizing_costs import record

    return replace(record(), state=state, function=function)


def test_runplane_resize_through_the_service(
    service_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_service(monkeypatch, service_url, CLI_USER, tmp_path)
    service = backend()
    uid = service.submit(_growing(tmp_path), RunOptions(params={"room_wait": "120"})).uid
    _await(lambda: service.get(uid).state == RunState.RUNNING)
    done = invoke("resize", uid[:12], "--mem", "512Mi")
    assert done.code == 0, done.stderr
    assert done.stdout == (
        f"{uid[:12]} resized by bob in place: memory 128Mi → 512Mi (asked by bob)\n"
    )
    refused = invoke("resize", uid, "--mem", "512Mi")
    assert refused.code == 6, refused.stderr  # a conflict: it has these limits already
    assert "these limits already" in refused.stderr
    assert invoke("resize", uid).code == 2  # neither --mem nor --cpu
    record = service.wait(uid, timeout=240)
    assert record.state == RunState.COMPLETED, record.status_text
    shown = invoke("get", "run", uid)
    assert "resizes" in shown.stdout
    assert "manual (bob)" in shown.stdout


def _await(ready: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, "not ready in time"
        time.sleep(0.05)

"""A storage that fails for a while loses nothing: a full disk (or a database busy, unreachable)
is a ``503`` with the reason, never a ``500`` nor a half-stored run, and every event the store
could not take is written once it can, so no run stays ``running`` after its end."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

import runplane
from runplane.config import load_settings
from runplane.service.api import create_app
from runplane.service.server import Server
from tests.service.conftest import TOKENS, USER, wait_state

ENDED = {"completed", "error", "aborted"}
QUICK = "def handler(context, x: int = 1):\n    return {'double': x * 2}\n"
#: Prints 40 MiB, far more than the disk has left.
LOUD = """\
import sys

def handler(context):
    line = "y" * 1023 + "\\n"
    for _ in range(40 * 1024):
        sys.stdout.write(line)
    return {"printed_mib": 40}
"""


def _function(tmp_path: Path, code: str, name: str) -> dict[str, Any]:
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    fn = runplane.code_to_function(name, filename=str(path), handler="handler")
    return fn.with_requests(cpu="100m", mem="32Mi").to_dict()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs: the disk a full disk is made on. Mounting needs root, which CI has;
    where it is refused this test fails, it does not skip."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            "the full-disk test mounts a 64 MiB tmpfs and must run as root (CI does): "
            f"mount said {done.stderr.strip() or done.returncode}"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def _fill(path: Path, leave: int) -> None:
    """Write ``path`` until its disk has at most ``leave`` bytes free."""
    with path.open("ab") as out:
        while True:
            free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
            if free <= leave:
                return
            try:
                out.write(b"\0" * min(free - leave, 1 << 20))
                out.flush()
            except OSError:
                return


@pytest.fixture
def server_on_small_disk(monkeypatch: pytest.MonkeyPatch, small_disk: Path) -> Iterator[Server]:
    for name in list(os.environ):
        if name.startswith("RUNPLANE_") and not name.startswith("RUNPLANE_TEST_POSTGRES"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    monkeypatch.setenv("RUNPLANE_LOCAL__HOME", str(small_disk / "home"))
    monkeypatch.setenv("RUNPLANE_LOCAL__RUN_USERS", "same")
    monkeypatch.setenv("RUNPLANE_LOCAL__CPU", "2")
    monkeypatch.setenv("RUNPLANE_LOCAL__MEMORY", "4Gi")
    monkeypatch.setenv("RUNPLANE_LOCAL__GPUS", "0")
    monkeypatch.setenv("RUNPLANE_SERVICE__TOKENS", TOKENS)
    monkeypatch.setenv("RUNPLANE_SERVICE__DATABASE_URL", f"sqlite:///{small_disk / 'runs.db'}")
    running = Server(load_settings())
    yield running
    running.close()


def test_a_full_disk_is_a_503_and_every_event_is_recorded_once_space_returns(
    server_on_small_disk: Server, small_disk: Path, tmp_path: Path
) -> None:
    client = TestClient(create_app(server_on_small_disk))
    quick = _function(tmp_path, QUICK, "quick")
    first = client.post("/api/v1/runs", headers=USER, json={"function": quick})
    assert first.status_code == 201, first.text
    assert wait_state(client, first.json()["uid"], ENDED)["state"] == "completed"

    filler = small_disk / "filler"
    _fill(filler, leave=6 << 20)
    loud = client.post(
        "/api/v1/runs", headers=USER, json={"function": _function(tmp_path, LOUD, "loud")}
    )
    assert loud.status_code == 201, loud.text
    uid = loud.json()["uid"]
    deadline = time.monotonic() + 60  # its output takes what was left
    while os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize > 256 << 10:
        assert time.monotonic() < deadline, "the loud run did not fill the disk"
        time.sleep(0.05)
    _fill(small_disk / "rest", leave=0)

    refused = client.post("/api/v1/runs", headers=USER, json={"function": quick})
    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"].isdigit()
    assert refused.json()["error"] == "ServiceUnavailable"
    assert "full" in refused.json()["message"], refused.json()
    listed = client.get("/api/v1/runs", headers=USER)
    assert listed.status_code == 200, listed.text  # what is recorded is still read
    assert {run["uid"] for run in listed.json()} == {first.json()["uid"], uid}

    filler.unlink()
    (small_disk / "rest").unlink()
    # Held events are written again within seconds (generous bound for a busy machine).
    run = wait_state(client, uid, ENDED, timeout=60)
    assert "running" in [change["state"] for change in run["transitions"]], run["transitions"]
    assert run["state"] == "error", run  # its supervision could not write its output

    again = client.post("/api/v1/runs", headers=USER, json={"function": quick})
    assert again.status_code == 201, again.text
    assert wait_state(client, again.json()["uid"], ENDED)["state"] == "completed"
    # The refused submission left nothing: no record, no directory.
    recorded = {run["uid"] for run in client.get("/api/v1/runs", headers=USER).json()}
    assert recorded == {first.json()["uid"], uid, again.json()["uid"]}
    run_dirs = {path.name for path in (small_disk / "home" / "runs").iterdir()}
    assert run_dirs <= recorded, run_dirs - recorded


def _driver_outage(database: str) -> OperationalError:
    """The error the database's driver raises for a full disk, as SQLAlchemy wraps it."""
    original: Exception
    if database.startswith("postgresql"):
        import psycopg.errors

        original = psycopg.errors.DiskFull('could not extend file "base/16384/16385"')
    else:
        original = sqlite3.OperationalError("database or disk is full")
    return OperationalError("INSERT INTO runs ...", {}, original)


def test_a_store_that_cannot_write_is_a_503_on_every_path(
    client: TestClient, server: Server, database: str, function_dict: Any
) -> None:
    done = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()})
    uid = done.json()["uid"]
    wait_state(client, uid, ENDED)
    store = server.runs.store

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise _driver_outage(database)

    with pytest.MonkeyPatch.context() as patch:
        for method in ("create", "get", "page", "request_abort"):
            patch.setattr(store, method, fail)
        answers = [
            client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}),
            client.get(f"/api/v1/runs/{uid}", headers=USER),
            client.get("/api/v1/runs", headers=USER),
            client.post(f"/api/v1/runs/{uid}/abort", headers=USER),
        ]
    for answer in answers:
        assert answer.status_code == 503, (answer.request.url, answer.text)
        assert answer.json()["error"] == "ServiceUnavailable"
        assert int(answer.headers["Retry-After"]) > 0
        if database.startswith("postgresql"):
            assert "disk of the run database is full" in answer.json()["message"]
    assert [run["uid"] for run in client.get("/api/v1/runs", headers=USER).json()] == [uid]


def test_an_error_that_is_no_outage_is_still_a_500(
    server: Server, function_dict: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(server.runs.store, "page", broken)
    client = TestClient(create_app(server), raise_server_exceptions=False)
    assert client.get("/api/v1/runs", headers=USER).status_code == 500


def test_events_the_store_refused_are_written_when_it_takes_them_again(
    server: Server, client: TestClient, function_dict: Any
) -> None:
    store = server.runs.store
    refusing = [True]
    apply_many, apply = store.apply_many, store.apply

    def outage_then(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if refusing[0]:
                raise OperationalError("UPDATE runs ...", {}, sqlite3.OperationalError("full"))
            return real(*args, **kwargs)

        return call

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "apply_many", outage_then(apply_many))
        patch.setattr(store, "apply", outage_then(apply))
        uid = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()[
            "uid"
        ]
        deadline = time.monotonic() + 60
        while not _ran(server, uid):  # the run executes while its events wait
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert client.get(f"/api/v1/runs/{uid}", headers=USER).json()["state"] == "created"
        refusing[0] = False
        run = wait_state(client, uid, ENDED, timeout=30)
    assert run["state"] == "completed"
    assert run["results"]["double"] == 2
    assert [change["state"] for change in run["transitions"]] == [
        "created",
        "pending",
        "running",
        "completed",
    ]


def _ran(server: Server, uid: str) -> bool:
    with contextlib.suppress(OSError):
        events = server.settings.local.home / "runs" / uid / "events.jsonl"
        return b'"result"' in events.read_bytes()
    return False


def test_a_ui_page_says_the_storage_cannot_serve(server: Server, database: str) -> None:
    from runplane.ui.app import create_ui

    ui = create_ui(server)

    @ui.get("/refusing")
    def refusing() -> None:
        raise _driver_outage(database)

    page = TestClient(ui).get("/refusing")
    assert page.status_code == 503
    assert page.headers["content-type"].startswith("text/html")
    assert int(page.headers["Retry-After"]) > 0
    assert "runplane cannot do this now" in page.text

"""The service's access log: failures by default, every request on request, none when off."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from runplane.service import access_log
from runplane.service.access_log import access_logged

from .cli_service import USER, running_service

BEARER = {"Authorization": f"Bearer {USER}"}
WRONG = {"Authorization": "Bearer not-a-token-of-this-service"}


def _requests(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        assert client.get("/api/v1/runs", headers=BEARER).status_code == 200
        assert client.get("/api/v1/runs?limit=2", headers=BEARER).status_code == 200
        assert client.get("/api/v1/runs", headers=WRONG).status_code == 401
        assert (
            client.get("/api/v1/runs/0123456789abcdef0123456789abcdef", headers=BEARER).status_code
            == 404
        )


def _access_lines(directory: Path) -> list[str]:
    text = (directory / "service.log").read_text()
    return [line for line in text.splitlines() if "runplane.access" in line]


def test_by_default_only_failures_are_logged(tmp_path):
    with running_service(tmp_path) as url:
        _requests(url)
    lines = _access_lines(tmp_path)
    assert len(lines) == 2, lines
    assert lines[0].endswith(" ms")
    assert '"GET /api/v1/runs HTTP/1.1" 401 in ' in lines[0]
    assert lines[0].split("runplane.access: ")[1].startswith("127.0.0.1:")
    assert '"GET /api/v1/runs/0123456789abcdef0123456789abcdef HTTP/1.1" 404 in ' in lines[1]
    # The token is nowhere in the log, the wrong one included.
    assert USER not in (tmp_path / "service.log").read_text()
    assert "not-a-token" not in (tmp_path / "service.log").read_text()


def test_all_logs_every_request_and_off_none(tmp_path):
    every, none = tmp_path / "all", tmp_path / "off"
    every.mkdir(), none.mkdir()
    with running_service(every, RUNPLANE_SERVICE__ACCESS_LOG="all") as url:
        _requests(url)
    # Besides the health checks of the service's start, each request, in order:
    asked = [line.split('"', 1)[1].rsplit(" in ", 1)[0] for line in _access_lines(every)]
    assert [line for line in asked if "/health" not in line] == [
        'GET /api/v1/runs HTTP/1.1" 200',
        'GET /api/v1/runs?limit=2 HTTP/1.1" 200',
        'GET /api/v1/runs HTTP/1.1" 401',
        'GET /api/v1/runs/0123456789abcdef0123456789abcdef HTTP/1.1" 404',
    ]
    with running_service(none, RUNPLANE_SERVICE__ACCESS_LOG="off") as url:
        _requests(url)
    assert _access_lines(none) == []


async def _call(app: Any, path: str) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "query_string": b"", "client": None}
    await app(scope, receive, send)
    return sent


async def _answers(scope: Any, receive: Any, send: Any) -> None:
    if scope["path"] == "/raises":
        raise RuntimeError("the app failed before it answered")
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_slow_answers_and_none_at_all_are_logged(monkeypatch, caplog):
    """A request whose answer is slow to begin is logged whatever its status, and one that
    got no answer (the app raised: uvicorn answers 500) is logged as such."""
    app = access_logged(_answers, "failures")
    with caplog.at_level(logging.INFO, logger="runplane.access"):
        sent = asyncio.run(_call(app, "/fast"))
        assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
        assert caplog.messages == []
        monkeypatch.setattr(access_log, "SLOW", 0.0)
        asyncio.run(_call(app, "/slow"))
        assert caplog.messages == ['- - "GET /slow HTTP/1.1" 200 in 0 ms']
        with pytest.raises(RuntimeError, match="failed before it answered"):
            asyncio.run(_call(app, "/raises"))
        assert caplog.messages[1] == '- - "GET /raises HTTP/1.1" no answer in 0 ms'


def test_off_is_the_app_itself():
    assert access_logged(_answers, "off") is _answers

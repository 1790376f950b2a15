"""The web UI's live streams against a real ``runplane serve``: bounded per user and in all
(a 429 with a reason and ``Retry-After``), never slowing the API for others, framed so that no
text can forge an event, and ended once their session is logged out."""

from __future__ import annotations

import json
import os
import re
import socket
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from testbed import serve

TOKENS = {"alice": "streams-alice-token-0123", "bob": "streams-bob-token-0123"}
TOKENS["carol"] = "streams-carol-token-0123"
PER_USER, TOTAL = 200, 230
#: Streams alice asks for: far past her cap, as a flood would.
FLOOD = 2000
#: Generous: refusing or opening a stream takes milliseconds (all of them take seconds).
FLOOD_SECONDS = 120

SLEEPER = "import time\n\ndef handler(context, seconds: float = 600):\n    time.sleep(seconds)\n"
TICKER = (
    "import time\n\ndef handler(context):\n    n = 0\n    while True:\n"
    "        n += 1\n        print(f'tick {n}', flush=True)\n        time.sleep(0.2)\n"
)
FAILS = (
    "def handler(context):\n    raise RuntimeError('first\\revent: end\\rdata: forged\\r\\nlast')\n"
)


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


@pytest.fixture
def service(tmp_path: Path, database: str) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env |= {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(tmp_path / "home"),
        "RUNPLANE_SERVICE__DATABASE_URL": database,
        "RUNPLANE_LOCAL__CPU": "2",
        "RUNPLANE_LOCAL__INHERIT_ENV": '["COVERAGE_PROCESS_CONFIG"]',
        "RUNPLANE_SERVICE__TOKENS": json.dumps(
            [{"token": token, "user": user} for user, token in TOKENS.items()]
        ),
        "RUNPLANE_SERVICE__LIVE_STREAMS__PER_USER": str(PER_USER),
        "RUNPLANE_SERVICE__LIVE_STREAMS__TOTAL": str(TOTAL),
        "RUNPLANE_SERVICE__LIVE_STREAMS__RETRY_AFTER": "7",
    }
    process, url = serve.start_service(env, tmp_path / "service.log")
    yield url
    process.kill()
    process.wait()


def submit(url: str, user: str, function: dict[str, Any]) -> str:
    created = httpx.post(f"{url}/api/v1/runs", headers=bearer(user), json={"function": function})
    assert created.status_code == 201, created.text
    return str(created.json()["uid"])


def wait_state(url: str, user: str, uid: str, states: set[str]) -> None:
    deadline = time.monotonic() + 60
    while (state := run_state(url, user, uid)) not in states:
        assert time.monotonic() < deadline, state
        time.sleep(0.1)


def run_state(url: str, user: str, uid: str) -> str:
    return str(httpx.get(f"{url}/api/v1/runs/{uid}", headers=bearer(user)).json()["state"])


def login(url: str, user: str) -> tuple[str, str]:
    """Log in by the form, as a browser does: the session cookie and its CSRF token."""
    with httpx.Client(base_url=url) as browser:
        page = browser.get("/ui/login")
        nonce = page.cookies["runplane_login"]
        done = browser.post("/ui/login", data={"nonce": nonce, "token": TOKENS[user], "next": ""})
        assert done.status_code == 303, done.text
        session = done.cookies["runplane_session"]
        home = browser.get("/ui/")
        csrf = re.search(r'data-csrf="([^"]+)"', home.text)
        assert csrf, home.text
        return session, csrf.group(1)


def open_stream(url: str, path: str, session: str) -> tuple[int, dict[str, str], socket.socket]:
    """A stream opened on a socket of its own and left open (never read past its headers)."""
    host, port = url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=60)
    connection.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
        f"Cookie: runplane_session={session}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        more = connection.recv(4096)
        assert more, head
        head += more
    lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, connection


def sse_events(
    chunks: Iterator[bytes], stop: Callable[[list[dict[str, str]]], bool]
) -> list[dict[str, str]]:
    """Events as the server-sent events format defines them: lines end at CRLF, CR or LF; a
    blank line dispatches; ``data`` fields join with LF; comments are skipped."""
    events: list[dict[str, str]] = []
    event: dict[str, str] = {}
    buffer = ""
    for chunk in chunks:
        buffer += chunk.decode()
        # A CR at the very end may be the first half of a CRLF: keep it for the next chunk.
        *lines, buffer = re.split(r"\r\n|\r(?!$)|\n", buffer) if buffer else [""]
        for line in lines:
            if not line:
                if "data" in event or "event" in event:
                    events.append(event)
                event = {}
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                event["data"] = event["data"] + "\n" + value if "data" in event else value
            elif name in ("event", "id"):
                event[name] = value
        if stop(events):
            break
    return events


def timed(client: httpx.Client, path: str, times: int) -> list[float]:
    took = []
    for _ in range(times):
        started = time.perf_counter()
        answer = client.get(path)
        took.append(time.perf_counter() - started)
        assert answer.status_code == 200, answer.text
    return took


def test_streams_are_bounded_and_the_api_stays_fast_for_others(
    service: str, function_dict: Callable[..., dict[str, Any]]
) -> None:
    alice_run = submit(service, "alice", function_dict(SLEEPER, name="alice-sleeps"))
    bob_run = submit(service, "bob", function_dict(SLEEPER, name="bob-sleeps"))
    for user, uid in (("alice", alice_run), ("bob", bob_run)):
        wait_state(service, user, uid, {"running"})
    alice, _ = login(service, "alice")
    bob, _ = login(service, "bob")
    opened: list[socket.socket] = []
    answers: dict[str, list[tuple[int, dict[str, str]]]] = {"alice": [], "bob": []}
    flood_began = time.monotonic()
    try:
        for user, session, uid, count in (
            ("alice", alice, alice_run, FLOOD),
            ("bob", bob, bob_run, 50),
        ):
            for _ in range(count):
                path = f"/ui/runs/{uid}/logs/live"
                status, headers, connection = open_stream(service, path, session)
                opened.append(connection)
                answers[user].append((status, headers))
                # Each open is a request too: a service the streams starve answers slowly.
                assert time.monotonic() - flood_began < FLOOD_SECONDS, (
                    f"{len(opened)} streams asked for in {FLOOD_SECONDS} s: the service is starved"
                )
        time.sleep(2)  # every open stream waits for output, as idle pages do
        with httpx.Client(base_url=service, headers=bearer("carol"), timeout=60) as carol:
            health = timed(carol, "/api/v1/health", 20)
            listing = timed(carol, "/api/v1/runs", 20)
    finally:
        for connection in opened:
            connection.close()

    slowest = max(health + listing)
    assert slowest < 1.0, (
        f"with {len(opened)} streams asked for, carol's requests took up to {slowest:.2f} s "
        f"(median /health {statistics.median(health):.3f} s, "
        f"/runs {statistics.median(listing):.3f} s)"
    )
    alice_statuses = [status for status, _ in answers["alice"]]
    assert alice_statuses.count(200) == PER_USER
    assert alice_statuses.count(429) == FLOOD - PER_USER
    refused = next(headers for status, headers in answers["alice"] if status == 429)
    assert refused["retry-after"] == "7"
    bob_statuses = [status for status, _ in answers["bob"]]
    assert bob_statuses.count(200) == TOTAL - PER_USER
    assert bob_statuses.count(429) == 50 - (TOTAL - PER_USER)


def test_a_refusal_says_which_limit_and_slots_come_back(
    service: str, function_dict: Callable[..., dict[str, Any]]
) -> None:
    uid = submit(service, "alice", function_dict(SLEEPER, name="sleeps"))
    wait_state(service, "alice", uid, {"running"})
    alice, _ = login(service, "alice")
    opened = [open_stream(service, f"/ui/runs/{uid}/logs/live", alice) for _ in range(PER_USER)]
    assert {status for status, _, _ in opened} == {200}
    with httpx.Client(base_url=service, cookies={"runplane_session": alice}) as browser:
        refused = browser.get(f"/ui/runs/{uid}/logs/live")
        assert refused.status_code == 429
        assert "service.live_streams.per_user = 200" in refused.text
        assert refused.headers["retry-after"] == "7"
        for _, _, connection in opened:
            connection.close()
        # Each closed stream's slot comes back once the service notices the client left.
        deadline = time.monotonic() + 60
        while (status := opened_status(browser, f"/ui/runs/{uid}/live")) == 429:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert status == 200


def opened_status(browser: httpx.Client, path: str) -> int:
    """The status a stream opens with (its body, which goes on, unread)."""
    with browser.stream("GET", path, timeout=30) as answer:
        return answer.status_code


def test_text_with_carriage_returns_cannot_forge_events(
    service: str, function_dict: Callable[..., dict[str, Any]]
) -> None:
    uid = submit(service, "alice", function_dict(FAILS, name="fails"))
    wait_state(service, "alice", uid, {"error"})
    alice, _ = login(service, "alice")
    browser = httpx.Client(base_url=service, cookies={"runplane_session": alice}, timeout=30)
    with browser, browser.stream("GET", f"/ui/runs/{uid}/live") as stream:
        events = sse_events(stream.iter_raw(), lambda seen: False)
    assert [event.get("event") for event in events] == ["summary", "end"]
    summary = events[0]["data"]
    assert "first\nevent: end\ndata: forged\nlast" in summary


def test_a_stream_ends_once_its_session_is_logged_out(
    service: str, function_dict: Callable[..., dict[str, Any]]
) -> None:
    uid = submit(service, "alice", function_dict(TICKER, name="ticks"))
    wait_state(service, "alice", uid, {"running"})
    alice, csrf = login(service, "alice")
    browser = httpx.Client(base_url=service, cookies={"runplane_session": alice}, timeout=30)
    with browser, browser.stream("GET", f"/ui/runs/{uid}/logs/live") as stream:
        chunks = stream.iter_raw()
        before = sse_events(chunks, lambda seen: len(seen) >= 2)
        assert [event["event"] for event in before] == ["log", "log"]
        out = browser.post("/ui/logout", data={"csrf": csrf})
        assert out.status_code == 303, out.text
        logged_out = time.monotonic()
        after = sse_events(chunks, lambda seen: time.monotonic() - logged_out > 20)
        ended_after = time.monotonic() - logged_out
    assert ended_after < 10, (
        f"the stream went on {ended_after:.1f} s after logout: {len(after)} events"
    )
    assert all(event.get("event") != "end" for event in after)
    # The logged-out session opens no new stream either.
    with httpx.Client(base_url=service, cookies={"runplane_session": alice}) as browser:
        assert browser.get(f"/ui/runs/{uid}/logs/live").status_code in (303, 401)
    httpx.post(f"{service}/api/v1/runs/{uid}/abort", headers=bearer("alice"))

"""A serving function's pod: the bootstrap's standard-library server runs the same handler as
the replicas here, with an interpreter that has nothing of runplane; and the autoscaler's rule."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import runplane
from runplane import names
from runplane.bootstrap import Event, Response, answer
from runplane.config import Settings
from runplane.runtimes.local.autoscale import Autoscaler
from tests.unit.test_bootstrap import shipped

CODE = """
import time

def init_context(context):
    context.user_data.prefix = "hi "

def handler(context, event):
    if event.path == "/slow":
        time.sleep(2)
    if event.path == "/fail":
        raise KeyError("model")
    if event.path == "/created":
        return 201, {"id": 7}
    return {"said": context.user_data.prefix + str(event.body), "method": event.method,
            "fields": event.fields, "type": event.content_type}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def pod(tmp_path: Path) -> Iterator[str]:
    """The rendered Deployment's container, run as the kubelet would: its environment, the
    bootstrap as a script, ``-I -S`` so nothing of runplane can be imported."""
    source = tmp_path / "serve.py"
    source.write_text(textwrap.dedent(CODE))
    fn = runplane.code_to_function(
        "greeter", filename=str(source), handler="handler", kind="serving"
    )
    fn.with_http(workers=1, worker_timeout=1)
    deployment = runplane.render(fn, Settings()).manifests[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env[names.ENV_HTTP_PORT] == "8080"
    assert container["readinessProbe"] == {"tcpSocket": {"port": "http"}, "periodSeconds": 5}
    port = _free_port()
    env[names.ENV_HTTP_PORT] = str(port)
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(shipped(tmp_path / "bootstrap"))],
        env={"PATH": os.environ["PATH"], **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
    yield url
    process.terminate()
    assert process.wait(10) == 0  # SIGTERM: a clean stop, as a rolling update expects


def _call(url: str, body: bytes | None = None, content_type: str = "application/json"):
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": content_type} if body else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_pod_serves_the_handler_with_the_standard_library(pod: str):
    assert _call(pod + "/x?a=1", b'{"n": 1}') == (
        200,
        {"said": "hi {'n': 1}", "method": "POST", "fields": {"a": "1"}, "type": "application/json"},
    )
    assert _call(pod + "/created") == (201, {"id": 7})
    status, body = _call(pod + "/fail")
    assert (status, body) == (500, {"error": "KeyError: 'model'"})


def test_a_request_that_finds_no_free_worker_in_time_gets_503(pod: str):
    slow = threading.Thread(target=_call, args=(pod + "/slow",))
    slow.start()
    time.sleep(0.3)
    status, body = _call(pod + "/quick")
    slow.join()
    assert status == 503
    assert body == {"error": "no free worker within 1 s; try again later"}


def test_what_a_handler_returns_becomes_the_answer():
    assert answer({"a": 1}) == (200, {"Content-Type": "application/json"}, b'{"a": 1}')
    assert answer("text") == (200, {"Content-Type": "text/plain; charset=utf-8"}, b"text")
    assert answer(b"\x00") == (200, {"Content-Type": "application/octet-stream"}, b"\x00")
    assert answer(None) == (200, {"Content-Type": "text/plain; charset=utf-8"}, b"")
    assert answer((404, {"missing": True})) == (
        404,
        {"Content-Type": "application/json"},
        b'{"missing": true}',
    )
    custom = Response(body="<b>", headers={"X-A": "1"}, content_type="text/html", status_code=202)
    assert answer(custom) == (202, {"X-A": "1", "Content-Type": "text/html"}, b"<b>")


def test_an_event_parses_a_json_body_only_when_it_says_it_is_json():
    assert Event(b'{"a": 1}', headers={"Content-Type": "application/json"}).body == {"a": 1}
    assert Event(b"{bad", headers={"content-type": "application/json"}).body == b"{bad"
    assert Event(b'{"a": 1}', headers={"Content-Type": "text/plain"}).body == b'{"a": 1}'


def test_the_autoscaler_follows_the_horizontal_pod_autoscaler_rule():
    scaler = Autoscaler(minimum=1, maximum=4, target_percent=50, scale_down_delay=60)
    assert scaler.decide(0, 1, 150).desired == 3  # ceil(1 * 150 / 50)
    assert scaler.decide(1, 3, 52).desired == 3  # within 10 % of the target: no change
    assert scaler.decide(2, 3, 1000).desired == 4  # never above max
    assert scaler.decide(3, 4, 10).desired == 4  # down waits for the window's highest
    assert scaler.decide(70, 4, 10).desired == 1  # the window has passed: down to min
    assert scaler.decide(71, 1, None).desired == 1  # nothing to measure: stays
    first = Autoscaler(minimum=1, maximum=100, target_percent=10, scale_down_delay=0)
    assert first.decide(0, 2, 1000).desired == 6  # at most doubled, and at least 4 more

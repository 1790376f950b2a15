"""What the CLI says to odd input, as a user meets it: a real ``runplane`` process against a
real ``runplane serve``. Each is exit code 2 and one line, never a traceback, never a secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import serve

TOKEN = "cli-inputs-token-0123456789"


@pytest.fixture(scope="module")
def service_url(tmp_path_factory: pytest.TempPathFactory):
    home = tmp_path_factory.mktemp("cli-inputs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env |= {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(home / "server-home"),
        "RUNPLANE_LOCAL__CPU": "2",
        "RUNPLANE_SERVICE__TOKENS": json.dumps([{"token": TOKEN, "user": "dave"}]),
    }
    process, url = serve.start_service(env, home / "service.log")
    yield url
    process.terminate()
    process.wait(timeout=30)


def cli(*args: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    environment |= {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(tmp_path / "client-home"),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "runplane", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def refused(done: subprocess.CompletedProcess[str], expected: str, code: int = 2) -> None:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("get", "run", ""),
        ("logs", ""),
        ("logs", "-f", ""),
        ("abort", ""),
        ("get", "run", " "),
        ("get", "run", "../schedules"),
        ("abort", "abc?x=1"),
    ],
)
def test_empty_or_odd_run_uids(service_url, tmp_path, args):
    done = cli(*args, tmp_path=tmp_path, RUNPLANE_API=service_url, RUNPLANE_TOKEN=TOKEN)
    refused(done, "error: uid: ")
    assert "a run uid is 32 hex characters, or a unique prefix of at least 6" in done.stderr


@pytest.mark.parametrize("suffix", ["/api/v1", "/api/v1/", "/"])
def test_an_api_url_given_with_the_api_path_works(service_url, tmp_path, suffix):
    done = cli("runs", tmp_path=tmp_path, RUNPLANE_API=service_url + suffix, RUNPLANE_TOKEN=TOKEN)
    assert done.returncode == 0, done.stderr
    assert "UID" in done.stdout


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("127.0.0.1:8470", "did you mean http://127.0.0.1:8470?"),
        ("localhost", "starts with http:// or https:// and a host"),
        ("http://127.0.0.1:notaport", "the port must be a number from 1 to 65535"),
        ("http://127.0.0.1:99999", "the port must be a number from 1 to 65535"),
        ("ftp://127.0.0.1", "starts with http:// or https://"),
        ("http://me:hunter2@127.0.0.1", "credentials go in RUNPLANE_TOKEN"),
    ],
)
def test_invalid_api_urls(tmp_path, url, expected):
    for how in ({"RUNPLANE_API": url}, {}):
        args = ("runs",) if how else ("--api", url, "runs")
        done = cli(*args, tmp_path=tmp_path, RUNPLANE_TOKEN=TOKEN, **how)
        refused(done, "error: configuration api: ")
        assert expected in done.stderr
        assert "hunter2" not in done.stderr


def test_a_service_url_that_is_not_the_service(service_url, tmp_path):
    """A URL that answers, but not with runplane's API (here: the service's docs page)."""
    done = cli("runs", tmp_path=tmp_path, RUNPLANE_API=service_url + "/docs", RUNPLANE_TOKEN=TOKEN)
    refused(done, "RUNPLANE_API is the service's base URL", code=5)  # not reached


@pytest.mark.parametrize(
    "token",
    ["h\u00fcnter2-token-value", "hunter2 token value", "hunter2\ttoken", "hunter2\u200btoken"],
    ids=["non-ascii", "space", "tab", "zero-width"],
)
def test_tokens_that_cannot_be_sent(service_url, tmp_path, token):
    done = cli("runs", tmp_path=tmp_path, RUNPLANE_API=service_url, RUNPLANE_TOKEN=token)
    refused(done, "error: configuration token: ")
    assert "printable ASCII without spaces" in done.stderr
    assert "nter2" not in done.stderr + done.stdout


def test_a_token_with_a_trailing_newline_is_taken_as_the_token(service_url, tmp_path):
    done = cli("runs", tmp_path=tmp_path, RUNPLANE_API=service_url, RUNPLANE_TOKEN=TOKEN + "\n")
    assert done.returncode == 0, done.stderr

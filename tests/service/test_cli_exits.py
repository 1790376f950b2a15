"""The exit-code convention (``runplane.cli.exits``), a representative command of each code,
on the embedded default and through the service."""

from __future__ import annotations

import os
from pathlib import Path

from runplane.cli.exits import ExitCode
from tests.service.cli_service import (  # noqa: F401 (fixtures)
    USER,
    both_backends,
    invoke,
    module_service,
)

JOBS = (
    "def train(context):\n    return {'ok': 1}\n\n"
    "def fail(context):\n    raise RuntimeError('the data is bad')\n"
)


def test_each_kind_of_ending_has_its_code(where: str, tmp_path: Path) -> None:
    jobs = str(tmp_path / "jobs.py")
    Path(jobs).write_text(JOBS)
    done = invoke("run", jobs, "--handler", "train")
    assert done.code == ExitCode.DONE == 0, done.stderr
    failed = invoke("run", jobs, "--handler", "fail")
    assert failed.code == ExitCode.RUN_FAILED == 1, failed.stderr
    assert "the data is bad" in failed.stderr
    for args in (["runs", "-o", "csv"], ["run", jobs, "--handler", "train", "--cpu", "1x"]):
        usage = invoke(*args)
        assert usage.code == ExitCode.USAGE == 2, (args, usage.stderr)
    for args in (["get", "run", "0123456789abcdef0123456789abcdef"], ["get", "node", "nope"]):
        missing = invoke(*args)
        assert missing.code == ExitCode.NOT_FOUND == 3, (args, missing.stderr)
        assert missing.stderr.startswith("error: "), missing.stderr
    refused = invoke("run", jobs, "--handler", "train", "--priority", "runplane-system")
    assert refused.code == ExitCode.REFUSED == 4, refused.stderr
    assert "reserved for core services" in refused.stderr
    uid = invoke("runs", "--name", "jobs", "-o", "json").stdout.split('"uid": "')[1][:32]
    finished = invoke("abort", uid)
    assert finished.code == ExitCode.CONFLICT == 6, finished.stderr
    assert "Traceback" not in finished.stderr


def test_an_unreachable_service_is_5(monkeypatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("RUNPLANE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    monkeypatch.setenv("RUNPLANE_LOCAL__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNPLANE_API", "http://127.0.0.1:9")  # nothing listens on discard
    monkeypatch.setenv("RUNPLANE_TOKEN", USER)
    away = invoke("runs")
    assert away.code == ExitCode.UNREACHABLE == 5, away.stderr
    assert away.stderr.startswith("error: the runplane service at http://127.0.0.1:9")

"""``runplane runs -w``, ``runplane get nodes|node`` and shell completion as a user meets them
(real processes), on the embedded default and through a ``runplane serve``."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from runplane.runtimes.local.node import NODE_NAME
from tests.service.cli_service import (  # noqa: F401 (a fixture)
    USER,
    clean_env,
    module_service,
    runplane,
)

SLOW = "import time\n\ndef handler(context):\n    time.sleep(1.5)\n    return {'slept': 1.5}\n"


@pytest.fixture(params=["embedded", "service"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """A user's environment: the embedded default with a private home, or the service."""
    home = {"RUNPLANE_LOCAL__HOME": str(tmp_path / "home"), "RUNPLANE_LOCAL__CPU": "2"}
    if request.param == "embedded":
        return clean_env(**home)
    url = request.getfixturevalue("service_url")
    return clean_env(RUNPLANE_API=url, RUNPLANE_TOKEN=USER, **home)


@pytest.fixture(autouse=True)
def interruptible_children() -> Iterator[None]:
    """Ctrl-C reaches the commands these tests start. A shell that starts the suite in the
    background without job control (``nohup pytest &``) ignores SIGINT in it, and an ignored
    signal stays ignored across exec: the commands would never see the Ctrl-C the tests send. A
    handler of this process's own is reset to the default by exec, which Python turns into
    KeyboardInterrupt."""
    before = signal.getsignal(signal.SIGINT)
    if before is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def lines_of(process: subprocess.Popen[str]) -> queue.Queue[str]:
    """The process's output lines, as they come."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_runs_watch_prints_a_line_per_change_until_ctrl_c(env: dict[str, str], tmp_path: Path):
    (tmp_path / "slow.py").write_text(SLOW)
    name = "slow-" + "".join(c for c in tmp_path.name.lower() if c.isalnum())[-12:]
    watch = subprocess.Popen(
        [sys.executable, "-m", "runplane", "runs", "-w", "--name", name],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = lines_of(watch)
    try:
        header = lines.get(timeout=60)
        assert header.split()[:4] == ["UID", "PROJECT", "NAME", "STATE"]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "runplane",
                "run",
                str(tmp_path / "slow.py"),
                "--handler",
                "handler",
                "--name",
                name,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        states = []
        while "completed" not in states:
            line = lines.get(timeout=30)
            assert line.split()[1:3] == ["default", name], line
            assert line.index(name) == header.index("NAME"), line  # under the header
            states.append(line.split()[3])
        assert "running" in states, states
        assert states.index("running") < states.index("completed")
    finally:
        watch.send_signal(signal.SIGINT)
        _, errors = watch.communicate(timeout=30)
    assert watch.returncode == 0, errors
    assert "Traceback" not in errors


def test_get_nodes_and_node(env: dict[str, str]) -> None:
    table = runplane(env, "get", "nodes")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split()[:4] == ["NAME", "READY", "GROUP", "CAPACITY-TYPE"]
    assert row.split()[:2] == [NODE_NAME, "yes"]
    assert "on-demand" in row
    assert "0/2" in row  # cpu requested of capacity: nothing runs
    wide = runplane(env, "get", "nodes", "-o", "wide").stdout
    assert f"kubernetes.io/hostname={NODE_NAME}" in wide
    described = runplane(env, "get", "node", NODE_NAME)
    assert described.returncode == 0, described.stderr
    assert "capacity type: on-demand" in described.stdout
    assert "requested:     cpu=0," in described.stdout
    as_yaml = yaml.safe_load(runplane(env, "get", "node", NODE_NAME, "-o", "yaml").stdout)
    (as_json,) = json.loads(runplane(env, "get", "nodes", "-o", "json").stdout)
    assert as_yaml == as_json
    assert as_json["capacity"]["cpu"] == 2000
    missing = runplane(env, "get", "node", "elsewhere")
    assert missing.returncode == 3
    assert missing.stderr == f"error: node 'elsewhere' does not exist (the nodes: {NODE_NAME})\n"


def completions(env: dict[str, str], *words: str) -> list[str]:
    """What Tab offers after ``runplane WORDS`` (the last word being typed), through click's
    completion protocol as the bash script drives it."""
    line = " ".join(("runplane", *words))
    done = subprocess.run(
        [sys.executable, "-m", "runplane"],
        env=env
        | {
            "_RUNPLANE_COMPLETE": "bash_complete",
            "COMP_WORDS": line,
            "COMP_CWORD": str(len(words)),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return [item.partition(",")[2] for item in done.stdout.splitlines() if item]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_completion_script_for_each_shell(shell: str, tmp_path: Path) -> None:
    from tests.service.cli_service import invoke

    done = invoke("completion", shell)
    assert done.code == 0, done.stderr
    assert "_RUNPLANE_COMPLETE" in done.stdout
    assert f"{shell}_complete" in done.stdout or f"{shell}_source" in done.stdout


def test_completion_of_commands_options_uids_and_function_names(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "slow.py").write_text(SLOW.replace("1.5", "0"))
    ran = runplane(env, "run", str(tmp_path / "slow.py"), "--handler", "handler", "--name", "tab")
    assert ran.returncode == 0, ran.stderr
    listed = json.loads(runplane(env, "runs", "-o", "json").stdout)
    uid = listed[0]["uid"]
    # A prefix no run of this service has (earlier tests' runs included).
    unused = next(
        prefix
        for prefix in (f"{a}{b}" for a in "0123456789abcdef" for b in "0123456789abcdef")
        if not any(run["uid"].startswith(prefix) for run in listed)
    )
    assert completions(env, "ge") == ["get"]
    assert {"nodes", "node", "run", "functions"} <= set(completions(env, "get", ""))
    assert completions(env, "runs", "--wa") == ["--watch"]
    assert completions(env, "runs", "-o", "") == ["table", "wide", "json", "yaml"]
    assert completions(env, "get", "run", uid[:4]) == [uid]
    assert completions(env, "logs", unused) == []
    assert completions(env, "get", "function", "t") == ["tab"]
    assert completions(env, "runs", "--name", "ta") == ["tab"]
    # A service that cannot be reached offers nothing, quickly, and says nothing.
    away = env | {"RUNPLANE_API": "http://127.0.0.1:9", "RUNPLANE_TOKEN": USER}
    assert completions(away, "get", "run", "") == []

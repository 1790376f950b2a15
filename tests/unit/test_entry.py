"""The container entry point runs a handler from its environment, as a pod would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from runplane.runtimes.invocation import Invocation


def entry(invocation: Invocation, tmp_path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **invocation.to_env(),
        "RUNPLANE_RUN_DIR": str(tmp_path),
        "RUNPLANE_TERMINATION_LOG": str(tmp_path / "term"),
    }
    return subprocess.run(
        [sys.executable, "-m", "runplane.runtimes.entry"], env=env, capture_output=True, text=True
    )


def test_entry_runs_the_handler_and_writes_the_termination_message(tmp_path):
    code = "def train(context, epochs: int = 1):\n    return {'epochs': epochs * 2}\n"
    invocation = Invocation(
        uid="u1",
        project="p",
        function="f",
        handler="train",
        code=code,
        filename="train.py",
        params={"epochs": 3},
    )
    done = entry(invocation, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "term").read_text()) == {"results": {"epochs": 6}}
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events == [{"type": "result", "key": "epochs", "value": 6}]


def test_entry_reports_a_failing_handler(tmp_path):
    code = "def train():\n    raise RuntimeError('no data')\n"
    invocation = Invocation(
        uid="u2",
        project="p",
        function="f",
        handler="train",
        code=code,
        filename="train.py",
        takes_context=False,
    )
    done = entry(invocation, tmp_path)
    assert done.returncode == 1
    assert "RuntimeError: no data" in done.stderr


def test_both_encodings_carry_the_same_call():
    invocation = Invocation(
        uid="u3",
        project="p",
        function="f",
        handler="h",
        code="é = 1\n",
        filename="a-b.py",
        takes_context=False,
        params={"x": [1, 2]},
        inputs={"data": "/tmp/d"},
        attempt=2,
    )
    assert Invocation.from_env(invocation.to_env()) == invocation
    assert Invocation.from_json(json.loads(json.dumps(invocation.to_json()))) == invocation
    assert invocation.module_name == "a_b"

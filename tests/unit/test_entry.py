"""The container entry point runs a handler from its environment, as a pod would."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys


def test_entry_runs_the_handler_and_writes_the_termination_message(tmp_path):
    code = "def train(context, epochs: int = 1):\n    return {'epochs': epochs * 2}\n"
    env = {
        **os.environ,
        "RUNPLANE_EXEC_CODE": base64.b64encode(code.encode()).decode(),
        "RUNPLANE_HANDLER": "train",
        "RUNPLANE_PARAMS": json.dumps({"epochs": 3}),
        "RUNPLANE_RUN_UID": "u1",
        "RUNPLANE_PROJECT": "p",
        "RUNPLANE_FUNCTION": "f",
        "RUNPLANE_RUN_DIR": str(tmp_path),
        "RUNPLANE_TERMINATION_LOG": str(tmp_path / "term"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "runplane.runtimes.entry"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "term").read_text()) == {"results": {"epochs": 6}}
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert events == [{"type": "result", "key": "epochs", "value": 6}]


def test_entry_reports_a_failing_handler(tmp_path):
    code = "def train():\n    raise RuntimeError('no data')\n"
    env = {
        **os.environ,
        "RUNPLANE_EXEC_CODE": base64.b64encode(code.encode()).decode(),
        "RUNPLANE_HANDLER": "train",
        "RUNPLANE_RUN_DIR": str(tmp_path),
        "RUNPLANE_TERMINATION_LOG": str(tmp_path / "term"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "runplane.runtimes.entry"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "RuntimeError: no data" in done.stderr

"""What a handler that may be retried gets from its context: its attempt, a checkpoint
directory that outlives the attempt, and the notice that the attempt is being stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runplane
from runplane import names
from runplane.bootstrap import Context, Invocation
from runplane.config import Settings
from runplane.errors import InvalidValueError
from runplane.runtimes.request import build_request
from tests.unit.test_bootstrap import shipped

CODE = "def train(context):\n    return {}\n"


def invocation(**fields: object) -> Invocation:
    return Invocation("u1", "p", "f", "train", CODE, "train.py", **fields)  # type: ignore[arg-type]


def test_here_checkpoints_live_in_the_runs_own_directory(tmp_path):
    context = Context(invocation(attempt=2), tmp_path, mounts={})
    assert context.attempt == 2
    assert context.last_checkpoint is None
    assert context.checkpoint_dir == str(tmp_path / "checkpoints")
    first = context.save_checkpoint("step-1", "a")
    time.sleep(0.01)
    second = context.save_checkpoint("step-2", b"b")
    (tmp_path / "checkpoints" / ".step-3.partial").write_text("half")  # a write cut short
    assert context.last_checkpoint == second
    assert Path(first).read_text() == "a"
    # The next attempt, a new process, finds them.
    assert Context(invocation(attempt=3), tmp_path, mounts={}).last_checkpoint == second
    with pytest.raises(ValueError, match="a name is a file name"):
        context.save_checkpoint("../escape", "x")


def test_in_a_pod_checkpoints_need_a_path_on_a_volume(tmp_path):
    in_pod = Context(invocation(), tmp_path)
    assert in_pod.checkpoint_dir is None
    assert in_pod.last_checkpoint is None
    with pytest.raises(RuntimeError, match="checkpoint_path to a directory on a mounted volume"):
        in_pod.save_checkpoint("step-1", "a")
    on_volume = Context(invocation(checkpoint_path=str(tmp_path / "ckpt" / "u1")), tmp_path)
    assert on_volume.checkpoint_dir == str(tmp_path / "ckpt" / "u1")
    # Here, a path under a mount is where the volume's directory is.
    local = Context(
        invocation(checkpoint_path="/ckpt/u1"), tmp_path, mounts={"/ckpt": str(tmp_path / "v")}
    )
    assert local.checkpoint_dir == str(tmp_path / "v" / "u1")


def test_the_invocation_carries_the_checkpoint_path():
    carried = invocation(checkpoint_path="/ckpt/u1", attempt=4)
    assert Invocation.from_env(carried.to_env()) == carried
    assert names.ENV_CHECKPOINT_PATH in names.RESERVED_ENV


def test_sigterm_calls_the_preemption_callbacks_first(tmp_path):
    """A spot reclaim or drain reaches a pod as SIGTERM: the callbacks write a last checkpoint
    in the grace period, then the handler unwinds as on any SIGTERM."""
    code = (
        "import pathlib, time\n"
        "def train(context):\n"
        "    step = {'n': 0}\n"
        "    @context.on_preemption\n"
        "    def last():\n"
        "        context.save_checkpoint('last', str(step['n']) + ' ' + str(context.preempted))\n"
        "    while True:\n"
        "        step['n'] += 1\n"
        f"        pathlib.Path({str(tmp_path / 'ready')!r}).touch()  # past a first step\n"
        "        time.sleep(0.01)\n"
    )
    checkpoints = tmp_path / "ckpt"
    call = Invocation("u1", "p", "f", "train", code, "train.py", checkpoint_path=str(checkpoints))
    env = {
        "PATH": os.environ["PATH"],
        **call.to_env(),
        names.ENV_RUN_DIR: str(tmp_path / "run"),
        "RUNPLANE_TERMINATION_LOG": str(tmp_path / "termination-log"),
    }
    script = shipped(tmp_path / "bootstrap")
    process = subprocess.Popen([sys.executable, "-I", "-S", str(script)], env=env, cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not (tmp_path / "ready").exists():
        assert process.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    steps, preempted = (checkpoints / "last").read_text().split()
    assert int(steps) >= 1
    assert preempted == "True"
    report = json.loads((tmp_path / "termination-log").read_text())
    assert report["error"] == "stopped by SIGTERM"


def test_a_function_states_its_checkpoints_and_grace_period(tmp_path):
    source = tmp_path / "train.py"
    source.write_text(CODE)
    fn = runplane.code_to_function("train", filename=str(source), handler="train")
    fn.with_checkpoints(path="/ckpt/{{run.uid}}", grace_period_seconds=120)
    fn.apply(runplane.mount_pvc("checkpoints", "ckpt-volume", "/ckpt"))
    request = build_request(fn, Settings(), uid="a" * 32)
    assert request.invocation.checkpoint_path == "/ckpt/" + "a" * 32
    assert request.pod_spec["terminationGracePeriodSeconds"] == 120
    env = {item["name"]: item.get("value") for item in request.pod_spec["containers"][0]["env"]}
    assert env[names.ENV_CHECKPOINT_PATH] == "/ckpt/" + "a" * 32
    assert "checkpoints-not-on-a-volume" not in {w.code for w in runplane.render(fn).lints}
    loose = runplane.code_to_function("t", filename=str(source), handler="train")
    loose.with_checkpoints(path="/scratch/ckpt")
    assert "checkpoints-not-on-a-volume" in {w.code for w in runplane.render(loose).lints}
    for bad in ({"path": "relative"}, {"path": "/runplane/ckpt"}, {"grace_period_seconds": -1}):
        with pytest.raises(InvalidValueError):
            fn.with_checkpoints(**bad)  # type: ignore[arg-type]

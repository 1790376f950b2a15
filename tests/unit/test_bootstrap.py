"""The program inside every run, run as a pod runs it: a script of the standard library,
with an interpreter that has nothing of runplane."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import runplane.bootstrap as bootstrap
from runplane import names
from runplane.bootstrap import RESULTS_MARKER, Invocation
from runplane.rendering.bootstrap import bootstrap_configmap, bootstrap_volume

PACKAGE = Path(bootstrap.__file__).parent


def shipped(mount: Path) -> Path:
    """The bootstrap as a pod's kubelet lays it out: its ConfigMap's keys where the volume's
    items put them, under ``mount``; returns the script the container's command runs."""
    data = bootstrap_configmap("default")["data"]
    for item in bootstrap_volume()["configMap"]["items"]:
        path = mount / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[item["key"]])
    python, script = names.BOOTSTRAP_COMMAND
    assert python == "python3"
    return mount / Path(script).relative_to(names.BOOTSTRAP_DIR)


def pod(invocation: Invocation, tmp_path: Path, *flags: str, script: Path | None = None):
    """Run the bootstrap as a container would: its script, the invocation in the environment.
    ``-I -S``: no site-packages, so no runplane to import."""
    script = script or shipped(tmp_path / "bootstrap")
    env = {
        "PATH": os.environ["PATH"],
        **invocation.to_env(),
        names.ENV_RUN_DIR: str(tmp_path / "run"),
        "RUNPLANE_TERMINATION_LOG": str(tmp_path / "termination-log"),
    }
    return subprocess.run(
        [sys.executable, *flags, str(script)], env=env, capture_output=True, text=True, cwd=tmp_path
    )


def test_it_keeps_to_the_python_39_language_and_the_standard_library():
    imported = set()
    for module in PACKAGE.glob("*.py"):
        tree = ast.parse(module.read_text(), feature_version=(3, 9))
        imported |= {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            or (isinstance(node, ast.ImportFrom) and not node.level)  # not its own modules
            for alias in (
                node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
            )
        }
    # runplane: only to find an installed copy; runplane_bootstrap: itself, as a pod's script
    # imports it; pandas: only when the handler hands over or asks for a DataFrame
    # (log_dataset, as_df), so the handler's image has it.
    assert imported - set(sys.stdlib_module_names) == {"runplane", "runplane_bootstrap", "pandas"}
    assert bootstrap.SHIPPED_AS == "runplane_bootstrap"


def test_a_pod_without_runplane_runs_the_handler(tmp_path):
    code = (
        "def train(context, epochs: int = 1):\n"
        "    context.log_artifact('model', body='w')\n"
        "    return {'epochs': epochs * 2}\n"
    )
    invocation = Invocation("u1", "p", "f", "train", code, "train.py", params={"epochs": 3})
    done = pod(invocation, tmp_path, "-I", "-S")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "termination-log").read_text())
    assert report["results"] == {"epochs": 6, "return": {"epochs": 6}}
    assert [(a["key"], a["size"]) for a in report["artifacts"]] == [("model", 1)]
    events = [
        json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    ]
    assert events[-1] == {"type": "result", "key": "return", "value": {"epochs": 6}}


def test_a_failing_handler_says_why(tmp_path):
    code = "def train():\n    raise RuntimeError('no data')\n"
    invocation = Invocation("u2", "p", "f", "train", code, "train.py", takes_context=False)
    done = pod(invocation, tmp_path, "-I", "-S")
    assert done.returncode == 1
    assert "RuntimeError: no data" in done.stderr
    assert (
        json.loads((tmp_path / "termination-log").read_text())["error"] == "RuntimeError: no data"
    )


def test_a_pod_run_s_context_has_its_run_s_labels(tmp_path):
    """MLRun code reads where it runs from its context's ``kind`` label (``job`` in a pod)."""
    code = "def train(context):\n    return dict(context.labels)\n"
    labels = {"team": "vision", "kind": "job"}
    invocation = Invocation("u6", "p", "f", "train", code, "train.py", labels=labels)
    done = pod(invocation, tmp_path, "-I", "-S")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "termination-log").read_text())["results"]["return"] == labels


def test_results_too_large_for_the_termination_message_end_the_log(tmp_path):
    code = "def train(context):\n    return {'weights': list(range(2000))}\n"
    done = pod(Invocation("u3", "p", "f", "train", code, "train.py"), tmp_path, "-I", "-S")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "termination-log").read_text()) == {"results_in_log": True}
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(RESULTS_MARKER)
    assert json.loads(last.removeprefix(RESULTS_MARKER))["results"]["weights"][-1] == 1999


def test_an_image_with_runplane_runs_its_own_copy(tmp_path):
    script = shipped(tmp_path / "shipped")
    # The shipped copy, altered so that running it (instead of the installed one) would show.
    program = script.parent / bootstrap.SHIPPED_AS / "pod.py"
    program.write_text(
        program.read_text().replace("def run_pod(", "def _unused(", 1) + "\nrun_pod = None\n"
    )
    code = "def train(context):\n    return {'ok': True}\n"
    done = pod(Invocation("u4", "p", "f", "train", code, "t.py"), tmp_path, script=script)
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "termination-log").read_text())["results"]
    assert results == {"ok": True, "return": {"ok": True}}


def test_both_encodings_carry_the_same_call():
    invocation = Invocation(
        uid="u5",
        project="p",
        function="f",
        handler="h",
        code="é = 1\n",
        filename="a-b.py",
        takes_context=False,
        params={"x": [1, 2]},
        inputs={"data": "/tmp/d"},
        attempt=2,
        labels={"team": "vision", "kind": "job"},
    )
    assert Invocation.from_env(invocation.to_env()) == invocation
    assert Invocation.from_json(json.loads(json.dumps(invocation.to_json()))) == invocation
    assert invocation.module_name == "a_b"


def test_sigterm_unwinds_the_handler_and_is_reported(tmp_path):
    """An abort reaches a pod as SIGTERM: the handler's ``finally`` runs, what it logged is
    reported, and the exit code says SIGTERM."""
    code = (
        "import pathlib, time\n"
        "def train(context):\n"
        "    context.log_result('progress', 1)\n"
        f"    pathlib.Path({str(tmp_path / 'ready')!r}).touch()\n"
        "    try:\n"
        "        while True:\n"
        "            time.sleep(0.05)\n"
        "    finally:\n"
        f"        pathlib.Path({str(tmp_path / 'cleaned')!r}).touch()\n"
    )
    invocation = Invocation("u1", "p", "f", "train", code, "train.py")
    env = {
        "PATH": os.environ["PATH"],
        **invocation.to_env(),
        names.ENV_RUN_DIR: str(tmp_path / "run"),
        "RUNPLANE_TERMINATION_LOG": str(tmp_path / "termination-log"),
    }
    script = shipped(tmp_path / "bootstrap")
    process = subprocess.Popen([sys.executable, "-I", "-S", str(script)], env=env, cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not (tmp_path / "ready").exists():  # the handler has started
        assert process.poll() is None
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    assert (tmp_path / "cleaned").exists()
    report = json.loads((tmp_path / "termination-log").read_text())
    assert report == {"results": {"progress": 1}, "artifacts": [], "error": "stopped by SIGTERM"}


def test_artifacts_go_to_the_artifact_path_where_its_volume_is(tmp_path):
    invocation = Invocation("u1", "p", "f", "train", "", "train.py", artifact_path="/data/u1")
    for name in ("pod", "local", "run"):
        (tmp_path / name).mkdir()
    in_pod = bootstrap.Context(invocation, tmp_path / "pod")
    assert in_pod.artifact_path == "/data/u1"  # volumes are where the function says
    volume = tmp_path / "volume"
    here = bootstrap.Context(invocation, tmp_path / "local", {"/data": str(volume), "/": "x"})
    assert here.artifact_path == f"{volume}/u1"  # the longest mount path wins
    written = here.log_artifact("model", body="w")
    assert Path(written).read_text() == "w"
    assert written == f"{volume}/u1/model"
    default = bootstrap.Context(Invocation("u2", "p", "f", "t", "", "t.py"), tmp_path / "run")
    assert default.artifact_path == str(tmp_path / "run" / "artifacts")

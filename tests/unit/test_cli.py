"""The ``runplane render`` command, run as a user runs it: a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

TRAIN = "def train(context, epochs: int = 1):\n    return {'accuracy': 0.9}\n"


def run(*args, cwd, env=None):
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    environment["RUNPLANE_CONFIG"] = str(cwd / "absent.yaml")
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "runplane", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
    )


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_render_python_file_with_flags(workdir):
    done = run(
        "render",
        "train.py",
        "--handler",
        "train",
        "--cpu",
        "1",
        "--memory",
        "1Gi",
        "--limit-memory",
        "2Gi",
        "--gpus",
        "1",
        "--node-selector",
        "zone=a",
        "--preemption-mode",
        "allow",
        "--priority",
        "high",
        "--env",
        "A=1",
        cwd=workdir,
    )
    assert done.returncode == 0, done.stderr
    (pod,) = list(yaml.safe_load_all(done.stdout))
    spec = pod["spec"]
    assert spec["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "2Gi", "nvidia.com/gpu": "1"},
    }
    assert spec["nodeSelector"] == {"zone": "a"}
    assert spec["priorityClassName"] == "high"
    assert {"name": "A", "value": "1"} in spec["containers"][0]["env"]
    assert "# QoS class: Burstable" in done.stdout
    assert "# warning memory-limit-above-request" in done.stdout
    assert "# warning stateful-job-on-spot" in done.stdout


def test_render_exported_yaml(workdir):
    export = (
        "import runplane\n"
        "fn = runplane.code_to_function('train', filename='train.py', handler='train')\n"
        "fn.with_requests(cpu=1, mem='1G')\n"
        "fn.export('function.yaml')\n"
    )
    subprocess.run([sys.executable, "-c", export], cwd=workdir, check=True)
    done = run("render", "function.yaml", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["metadata"]["name"] == "train"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["render", "train.py", "--memory", "1g"],
            "error: --memory: '1g' is not valid; a memory quantity must be",
        ),
        (["render", "train.py", "--handler", "nope"], "error: handler: 'nope' is not valid"),
        (["render", "missing.py"], "error: filename: 'missing.py' does not exist"),
        (
            ["render", "train.py", "--priority", "urgent"],
            "error: priority_class_name: 'urgent' is not valid; valid priority classes are low, "
            "medium, high",
        ),
        (
            ["render", "train.py", "--node-selector", "app.iguazio.com/lifecycle=preemptible"],
            "error: node_selector: app.iguazio.com/lifecycle=preemptible selects spot nodes",
        ),
        (
            ["render", "train.py", "--node-selector", "novalue"],
            "error: --node-selector: 'novalue' is not valid; the form is key=value",
        ),
    ],
)
def test_user_errors_exit_2_without_traceback(workdir, args, message):
    done = run(*args, cwd=workdir)
    assert done.returncode == 2
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_bad_configuration_exits_2(workdir):
    done = run(
        "render",
        "train.py",
        cwd=workdir,
        env={"RUNPLANE_FUNCTION_DEFAULTS__PREEMPTION_MODE": "bogus"},
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: configuration function_defaults.preemption_mode")


def test_secret_values_are_redacted_in_printed_manifests():
    import runplane
    from runplane.cli.main import _redacted
    from runplane.config import load_settings
    from runplane.rendering import render

    fn = runplane.new_function("t").apply(runplane.mount_v3io(access_key="TOPSECRET"))
    printed = yaml.safe_dump_all([_redacted(m) for m in render(fn, load_settings()).manifests])
    assert "TOPSECRET" not in printed
    assert "accessKey: <redacted>" in printed

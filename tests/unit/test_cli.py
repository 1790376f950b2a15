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
    environment["RUNPLANE_CONFIG"] = os.devnull
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
    configmap, pod = yaml.safe_load_all(done.stdout)  # what the pod mounts comes first
    assert configmap["kind"] == "ConfigMap"
    assert configmap["data"]["__main__.py"].startswith('"""')  # readable, as a block
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
    *_, pod = yaml.safe_load_all(done.stdout)
    assert pod["metadata"]["name"] == "train"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["render", "train.py", "--memory", "1g"],
            "error: --memory: '1g' is not valid; a memory quantity must be",
        ),
        (["render", "train.py", "--handler", "nope"], "error: handler: 'nope' is not valid"),
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


def test_a_missing_file_exits_3_not_found(workdir):
    done = run("render", "missing.py", cwd=workdir)
    assert done.returncode == 3
    assert done.stderr.startswith("error: filename: 'missing.py' does not exist"), done.stderr
    assert "Traceback" not in done.stderr


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
    from runplane.config import load_settings
    from runplane.rendering import render
    from runplane.rendering.text import manifests_yaml

    fn = runplane.new_function("t").apply(runplane.mount_v3io(access_key="TOPSECRET"))
    printed = manifests_yaml(render(fn, load_settings()).manifests)
    assert "TOPSECRET" not in printed
    assert "accessKey: <redacted>" in printed


def test_configuration_mistakes_are_errors_not_tracebacks(workdir):
    bad_yaml = workdir / "config.yaml"
    bad_yaml.write_text("namespace: [unclosed\n")
    cases = [
        ({"RUNPLANE_CONFIG": str(bad_yaml)}, "is not valid YAML"),
        ({"RUNPLANE_CONFIG": str(workdir / "missing.yaml")}, "which does not exist"),
        ({"RUNPLANE_API": "http://127.0.0.1:1"}, "RUNPLANE_TOKEN: None is not valid; the service"),
        ({"RUNPLANE_LOCAL__POLL_INTERVAL": "fast"}, "configuration local.poll_interval"),
    ]
    for env, message in cases:
        done = run("runs", cwd=workdir, env=env)
        assert done.returncode == 2, (env, done.stderr)
        assert done.stderr.startswith("error: "), done.stderr
        assert message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_unknown_state_filters_and_settings_are_said(workdir):
    done = run(
        "runs", "--state", "finished", cwd=workdir, env={"RUNPLANE_LOCAL__HOME": str(workdir)}
    )
    assert done.returncode == 2
    assert "'finished' is not one of 'created', 'pending', 'running'" in done.stderr
    typo = run(
        "runs", cwd=workdir, env={"RUNPLANE_NAMESPAC": "x", "RUNPLANE_LOCAL__HOME": str(workdir)}
    )
    assert typo.returncode == 0
    assert "RUNPLANE_NAMESPAC is not a runplane setting and is ignored" in typo.stderr


def test_command_line_errors_give_command_line_examples(workdir):
    home = {"RUNPLANE_LOCAL__HOME": str(workdir / "home")}
    for flags, example in (
        (["--cpu", "1x"], "(example: --cpu 500m)"),
        (["--limit-memory", "1g"], "(example: --limit-memory 1Gi)"),
        (["--priority", "urgent"], "(example: --priority high)"),
        (["--param", "epochs=many"], "(example: --param epochs=3)"),
        (["--threshold", "running=soon"], "(example: --threshold running='1 min')"),
    ):
        done = run("run", "train.py", "--handler", "train", *flags, cwd=workdir, env=home)
        assert done.returncode == 2, done.stderr
        assert example in done.stderr, done.stderr
        assert "with_" not in done.stderr  # no SDK call in a command's hint


def test_output_to_a_pipe_is_not_wrapped(workdir):
    long_name = "a-function-whose-name-is-long-enough-to-pass-sixty-characters"
    (workdir / "long.py").write_text(TRAIN)
    home = {"RUNPLANE_LOCAL__HOME": str(workdir / "home")}
    done = run("run", "long.py", "--handler", "train", "--name", long_name, cwd=workdir, env=home)
    assert done.returncode == 0, done.stderr
    table = run("runs", cwd=workdir, env=home).stdout.splitlines()
    assert any(long_name in line for line in table)
    assert all(len(line) > 80 for line in table[:2])  # one line per run, however long


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ("0", "0 is out of range; the allowed range is 1 to 1000"),
        ("-5", "-5 is out of range; the allowed range is 1 to 1000"),
        ("1001", "1001 is out of range; the allowed range is 1 to 1000"),
        ("9" * 5000, "a number of 5000 digits is out of range; the allowed range is 1 to 1000"),
        ("ten", "'ten' is not a whole number; the allowed range is 1 to 1000"),
    ],
)
def test_runs_limit_is_bounded(workdir, limit, said):
    done = run("runs", "--limit", limit, cwd=workdir, env={"RUNPLANE_LOCAL__HOME": str(workdir)})
    assert done.returncode == 2
    assert f"Invalid value for '--limit': {said}" in done.stderr
    assert len(done.stderr) < 400  # one short message, however long the value
    assert "Traceback" not in done.stderr


def test_huge_and_tiny_resources_get_one_short_line(workdir):
    home = {"RUNPLANE_LOCAL__HOME": str(workdir)}
    for flags, said in (
        (["--gpus", "9" * 5000], "a number of 5000 digits is out of range"),
        (["--gpus", "99999"], "99999 is out of range; the allowed range is 0 to 4096"),
        (["--limit-memory", "0"], "a memory limit is at least 16Mi"),
        (["--limit-memory", "8Mi"], "a memory limit is at least 16Mi"),
    ):
        done = run("render", "train.py", "--handler", "train", *flags, cwd=workdir, env=home)
        assert done.returncode == 2, done.stdout
        assert said in done.stderr, done.stderr
        assert len(done.stderr) < 600
        assert "with_limits" not in done.stderr  # the hint is a flag: --limit-memory 256Mi


@pytest.mark.parametrize("args", [("get", "run", ""), ("logs", ""), ("abort", "")])
def test_an_empty_run_uid_is_a_clear_error(workdir, args):
    done = run(*args, cwd=workdir, env={"RUNPLANE_LOCAL__HOME": str(workdir)})
    assert done.returncode == 2
    assert done.stderr.startswith("error: uid: '' is not valid; a run uid is 32 hex characters")


@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [("--param", "epochs=a\udcffb", "params.epochs"), ("--env", "G=a\udcffb", "env G")],
)
def test_text_that_is_no_unicode_is_refused_before_a_run(workdir, flag, value, field):
    """Bytes that are no UTF-8 reach Python's argv as lone surrogates: refused, naming the
    flag's field, and nothing is recorded."""
    home = {"RUNPLANE_LOCAL__HOME": str(workdir)}
    done = run("run", "train.py", "--handler", "train", flag, value, cwd=workdir, env=home)
    assert done.returncode == 2, done.stderr
    assert f"error: {field}: " in done.stderr
    assert "lone UTF-16 surrogate" in done.stderr
    assert "Traceback" not in done.stderr
    listed = run("runs", cwd=workdir, env=home).stdout
    assert len(listed.strip().splitlines()) == 1, listed  # the table's header alone

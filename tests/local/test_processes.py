"""Across processes: no overbooking, aborts from another process, executor crashes, the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import yaml

from runplane.cli.exits import ExitCode
from runplane.config import load_settings
from runplane.service.embedded import EmbeddedService
from runplane.spec.run_options import RunOptions

from .test_local_runs import wait_for

SLEEPER = textwrap.dedent("""
    import time

    def handler(context, seconds: float = 1.0):
        start = time.time()
        time.sleep(seconds)
        return {"start": start, "end": time.time()}
""")


def cli(*args, check=False, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "runplane", *args],
        capture_output=True,
        text=True,
        check=check,
        **kwargs,
    )


def test_two_commands_at_once_do_not_overbook(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    args = ["run", str(script), "--handler", "handler", "--param", "seconds=1", "--cpu", "1500m"]
    first = subprocess.Popen(
        [sys.executable, "-m", "runplane", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    second = subprocess.Popen(
        [sys.executable, "-m", "runplane", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for process in (first, second):
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        assert "completed" in out
    service = EmbeddedService(load_settings()).start()
    try:
        a, b = service.store.list_runs()
        assert a.results["start"] >= b.results["end"] or b.results["start"] >= a.results["end"]
        assert a.state == b.state == "completed"
    finally:
        service.close()


def test_abort_from_another_process(tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runplane",
            "run",
            str(script),
            "--handler",
            "handler",
            "--param",
            "seconds=60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    service = EmbeddedService(load_settings()).start()
    try:
        uid = wait_for(lambda: [r.uid for r in service.store.list_runs() if r.state == "running"])[
            0
        ]
        done = cli("abort", uid[:8])
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"{uid} aborted")
        out, _ = runner.communicate(timeout=30)
        assert runner.returncode == 1
        assert "aborted" in out
        again = cli("abort", uid)
        assert again.returncode == ExitCode.CONFLICT
        assert again.stderr.startswith(f"error: run {uid} already finished (aborted)")
    finally:
        service.close()


def test_killed_executor_is_recovered_on_next_start(tmp_path):
    script = tmp_path / "owner.py"
    script.write_text(
        textwrap.dedent(f"""
        import runplane
        fn = runplane.code_to_function("sleeper", filename={str(tmp_path / "sleeper.py")!r},
                                       handler="handler")
        fn.with_requests(cpu=2)
        fn.run(params={{"seconds": 60}})
    """)
    )
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    owner = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    observer = EmbeddedService(load_settings()).start()
    try:
        record = wait_for(lambda: [r for r in observer.store.list_runs() if r.state == "running"])[
            0
        ]
        handler_pid = record.attempts[0].process_id
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        # The run's own process dies with its executor.
        wait_for(lambda: not _alive(handler_pid), timeout=10)
    finally:
        observer.close()
    restarted = EmbeddedService(load_settings())
    try:
        # Built, not started: nothing of what the dead executor left is settled yet.
        assert restarted.store.get(record.uid).state == "running"
        assert restarted.reconciliation.lost == []
        restarted.start()
        assert record.uid in restarted.reconciliation.lost
        lost = restarted.store.get(record.uid)
        assert lost.state == "error"
        assert lost.reason == "executor lost"
        assert lost.attempts[0].ended_at is not None
        # Nothing is left reserved: a run that needs the whole machine starts at once.
        fn_path = tmp_path / "sleeper.py"
        import runplane

        fn = runplane.code_to_function("again", filename=str(fn_path), handler="handler")
        uid = restarted.submit(fn.with_requests(cpu=2), RunOptions(params={"seconds": 0.1})).uid
        assert restarted.wait(uid, timeout=30).state == "completed"
    finally:
        restarted.close()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_cli_run_runs_get_and_logs(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        def train(context, epochs: int = 1):
            context.logger.info("epoch count %d", epochs)
            return {"epochs": epochs}
    """)
    )
    done = cli(
        "run",
        str(script),
        "--handler",
        "train",
        "--param",
        "epochs=4",
        "--cpu",
        "1",
        "--memory",
        "128Mi",
        "--limit-memory",
        "256Mi",
    )
    assert done.returncode == 0, done.stderr
    assert "completed (Completed)" in done.stdout
    assert "epochs=4" in done.stdout
    assert "peak memory" in done.stdout
    table = cli("runs")
    assert table.returncode == 0
    assert "train" in table.stdout
    assert "completed" in table.stdout
    uid = table.stdout.splitlines()[1].split()[0]
    detail = yaml.safe_load(cli("get", "run", uid, "-o", "yaml", check=True).stdout)
    shown = cli("get", "run", uid, check=True).stdout
    assert "attempts" in shown
    assert "completed" in shown
    assert "what it got" in shown  # as the run's page says it
    assert "memory 256Mi" in shown
    assert "1: on " in shown
    assert detail["state"] == "completed"
    assert detail["results"] == {"epochs": 4, "return": {"epochs": 4}}
    assert [t["state"] for t in detail["transitions"]] == [
        "created",
        "pending",
        "running",
        "completed",
    ]
    assert detail["limits"] == {"memory": "256Mi"}
    # How it was held: in a cgroup of its own, as runplane's own user (the embedded default).
    assert detail["isolation"].startswith("cgroup v")
    assert detail["isolation"].endswith(f"uid {os.geteuid()} (runplane's)")
    logs = cli("logs", uid, check=True)
    assert "epoch count 4" in logs.stdout


def test_cli_user_errors(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("def train(context, epochs: int = 1):\n    return epochs\n")
    for args, message, code in (
        (
            ["run", str(script), "--handler", "train", "--param", "epochs=many"],
            "error: params['epochs']: 'many' is not valid; the handler expects int",
            ExitCode.USAGE,
        ),
        (
            ["run", str(script), "--handler", "nope"],
            "error: handler: 'nope' is not valid",
            ExitCode.USAGE,
        ),
        (
            ["get", "run", "0123456789abcdef0123456789abcdef"],
            "error: run '0123456789abcdef0123456789abcdef' does not exist",
            ExitCode.NOT_FOUND,
        ),
        (
            ["run", str(script), "--handler", "train", "--threshold", "running=soon"],
            "error: run(state_thresholds=...)['running']: 'soon' is not valid",
            ExitCode.USAGE,
        ),
    ):
        done = cli(*args)
        assert done.returncode == code, (args, done.stderr)
        assert done.stderr.startswith(message), done.stderr
        assert "Traceback" not in done.stderr


def test_sdk_run_handle(tmp_path, make_function):
    fn = make_function(SLEEPER)
    handle = fn.run(params={"seconds": 5}, watch=False)
    wait_for(lambda: handle.state() == "running")
    handle.abort()
    record = handle.wait(timeout=10)
    assert record.state == "aborted"
    done = make_function(SLEEPER, name="quick").run(params={"seconds": 0.01})
    assert done.state() == "completed"
    assert set(done.outputs) == {"start", "end", "return"}
    started = time.time()
    assert done.logs() == ""
    assert time.time() - started < 1

"""A run's whole life on this machine: nothing it starts outlives it, nothing waits forever,
and a command that stops takes its run with it, saying so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from runplane.service.core import process_alive
from runplane.spec.run_options import RunOptions

from .test_local_runs import wait_for

DAEMON = """
import os, subprocess, sys, time

def handler(context, pidfile: str, linger: float = 0.0):
    # A daemon the usual way: fork, setsid, fork again; the middle process exits at once.
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(pidfile, "w") as out:
                out.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    while not os.path.exists(pidfile):
        time.sleep(0.01)
    time.sleep(linger)
"""


def read_pid(path: Path) -> int:
    return int(wait_for(lambda: path.exists() and path.read_text() and path.read_text()))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("isolation", ["cgroup", "watchdog"], indirect=True)
@pytest.mark.parametrize("ending", ["completes", "aborted", "threshold"])
def test_a_daemon_the_run_started_ends_with_the_run(
    isolation, service, make_function, tmp_path, ending
):
    pidfile = tmp_path / "daemon.pid"
    fn = make_function(DAEMON, name="daemonizer")
    linger = 0.0 if ending == "completes" else 60.0
    thresholds = {"running": "1s"} if ending == "threshold" else {}
    uid = service.submit(
        fn,
        RunOptions(params={"pidfile": str(pidfile), "linger": linger}, state_thresholds=thresholds),
    ).uid
    daemon = read_pid(pidfile)
    assert psutil.Process(daemon).ppid() != psutil.Process().pid  # it left the run's tree
    if ending == "aborted":
        service.abort(uid)
    record = service.wait(uid, timeout=30)
    assert record.state == {"completes": "completed", "aborted": "aborted"}.get(ending, "aborted")
    deadline = time.monotonic() + 1.0
    while not gone(daemon):
        assert time.monotonic() < deadline, f"the run's daemon {daemon} outlived the run"
        time.sleep(0.02)


def test_a_zombie_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    wait_for(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE)
    started = psutil.Process(child.pid).create_time()
    assert not process_alive(child.pid, started)
    child.wait()


def cli(*args: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runplane", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


SLEEPER = "import time\n\ndef handler(context, seconds: float = 60):\n    time.sleep(seconds)\n"


def running_uid(service, command: subprocess.Popen[str]) -> str:
    """The uid of the run ``command`` started, once it runs. A CLI's start (an interpreter,
    imports, coverage) takes seconds on a loaded machine, so the bound is generous; a command
    that exits first fails the wait at once with its words."""

    def running() -> list[str]:
        if command.poll() is not None:
            _, err = command.communicate()
            raise AssertionError(f"the command exited {command.returncode} first: {err}")
        return [r.uid for r in service.store.list_runs() if r.state == "running"]

    return str(wait_for(running, timeout=120)[0])


def test_a_stopped_command_aborts_its_run(service, tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    runner = cli("run", str(tmp_path / "sleeper.py"), "--handler", "handler")
    uid = running_uid(service, runner)
    worker = service.store.get(uid).attempts[0].process_id
    runner.send_signal(signal.SIGTERM)
    _, err = runner.communicate(timeout=30)
    assert runner.returncode == 1, err
    record = service.store.get(uid)
    assert record.state == "aborted"
    assert wait_for(lambda: gone(worker), timeout=5)


def test_following_a_run_whose_owner_died_ends(service, tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    owner = cli("run", str(tmp_path / "sleeper.py"), "--handler", "handler")
    uid = running_uid(service, owner)
    follower = cli("logs", "-f", uid)
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=10)
    follower.communicate(timeout=30)  # ends instead of following forever
    record = service.store.get(uid)
    assert (record.state, record.reason) == ("error", "executor lost")
    assert "is gone" in record.status_text


def test_watching_a_run_that_cannot_start_says_why(tmp_path):
    (tmp_path / "job.py").write_text(SLEEPER)
    program = textwrap.dedent(f"""
        import runplane
        fn = runplane.code_to_function("gpu-job", filename={str(tmp_path / "job.py")!r},
                                       handler="handler")
        fn.with_limits(gpus=1)
        run = fn.run(state_thresholds={{"pending_not_scheduled": "1s"}})
        print(run.state())
        print(runplane.render(fn).qos)  # runplane.render is still the function after a run
    """)
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["aborted", "BestEffort"]
    assert "pending: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu." in done.stderr
    assert "this machine has nvidia.com/gpu 0 in all" in done.stderr
    assert "aborted: Run aborted due to exceeded state threshold: pending_not_scheduled" in (
        done.stderr
    )


def test_a_session_without_a_script_runs_code_that_imports_its_neighbours(tmp_path):
    """A notebook or ``python -c`` has no script file: its code is the working directory's,
    and a handler imports modules beside it from there, as the session itself does."""
    (tmp_path / "helper.py").write_text("VALUE = 41\n")
    (tmp_path / "job.py").write_text(
        "import helper\n\ndef handler(context):\n    return helper.VALUE + 1\n"
    )
    program = textwrap.dedent("""
        import runplane
        fn = runplane.code_to_function("neighbours", filename="job.py", handler="handler")
        record = fn.run(watch=False).wait()
        print(record.state, record.results, record.status_text)
    """)
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "completed {'return': 42}"


def _follow(uid: str) -> tuple[str, int]:
    """What ``runplane logs -f`` prints of the run, and the most memory it held (KiB)."""
    probe = textwrap.dedent(f"""
        import resource, sys
        from runplane.cli.main import main
        try:
            main(["logs", "-f", {uid!r}])
        except SystemExit:
            pass
        finally:
            sys.stdout.flush()
            print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.decode(), int(done.stderr.decode().split()[-1])


def test_a_long_output_streams_once(service, make_function):
    """Following a log costs the same memory whatever its length: it streams in chunks, read
    once, never held whole (a 27 MiB longer log may not cost even 20 MiB more)."""
    peaks = {}
    for mib in (3, 30):
        size = mib * 2**20
        fn = make_function(
            f"import sys\n\ndef handler(context):\n    sys.stdout.write('é' * {size // 2})\n",
            name=f"chatty-{mib}",
        )
        uid = service.submit(fn).uid
        assert service.wait(uid, timeout=120).state == "completed"
        text, peaks[mib] = _follow(uid)
        assert text == "é" * (size // 2)  # whole, no character split
    growth = (peaks[30] - peaks[3]) >> 10
    assert growth < 20, f"following a 30 MiB log took {growth} MiB more than a 3 MiB one: {peaks}"

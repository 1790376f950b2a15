"""The warm launcher: runs forked from one pre-imported server, each as isolated as a fresh
interpreter. What one run does to its process (a crash, ``os._exit``, a thread left running, a
changed global) never reaches the next, nor the server; the server's own environment holds
nothing of runplane's; and ``local.launcher: fresh`` starts a new interpreter per run."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from runplane.config import load_settings
from runplane.service.embedded import EmbeddedService
from runplane.spec.run_options import RunOptions

from .test_local_runs import wait_for

WHERE = """
import os, sys

def handler(context):
    return {"parent": os.getppid(), "warm": "runplane_local_child" in sys.modules}
"""

POISON = """
import json, os, sys, threading, time
import runplane.bootstrap as bootstrap

def handler(context, how: str, release: str = ""):
    if how == "globals":
        json.dumps = lambda *args, **kwargs: "poisoned"
        bootstrap.call_handler = None
        sys.path.append("/poisoned")
        sys.modules["poisoned_module"] = sys
        os.environ["POISONED"] = "1"
    elif how == "crash":
        os.kill(os.getpid(), 11)
    elif how == "exit":
        os._exit(3)
    elif how == "thread":
        def linger():
            while not os.path.exists(release):
                time.sleep(0.01)
        threading.Thread(target=linger, name="leaked").start()  # not a daemon
    return "done"
"""

CHECK = """
import json, os, sys, threading
import runplane.bootstrap as bootstrap

def handler(context):
    return {
        "dumps": json.dumps({"a": 1}),
        "bootstrap": bootstrap.call_handler is not None,
        "path": "/poisoned" in sys.path,
        "module": "poisoned_module" in sys.modules,
        "env": "POISONED" in os.environ,
        "threads": sorted(t.name for t in threading.enumerate()),
        "parent": os.getppid(),
    }
"""

PRISTINE = {
    "dumps": '{"a": 1}',
    "bootstrap": True,
    "path": False,
    "module": False,
    "env": False,
    "threads": ["MainThread"],
}


def server(service: EmbeddedService) -> int:
    """The pid of the service's fork server (0 before its first run)."""
    launcher = service.runtime.launcher
    assert launcher is not None
    return launcher.server_pid


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_run_is_forked_from_the_warm_server(service, make_function):
    record = service.wait(service.submit(make_function(WHERE)).uid, timeout=30)
    assert record.state == "completed", record.status_text
    assert record.results["return"]["parent"] == server(service)
    assert "forkserver.py" in " ".join(psutil.Process(server(service)).cmdline())
    assert record.results["return"]["warm"] is True
    assert "local.launcher: warm" in service.runtime.isolation


@pytest.mark.parametrize("how", ["globals", "crash", "exit", "thread"])
def test_what_a_run_does_to_its_interpreter_never_reaches_the_next(
    service, make_function, tmp_path, how
):
    poison = make_function(POISON, name="poison")
    check = make_function(CHECK, name="check")
    release = tmp_path / "release"
    first = service.submit(poison, RunOptions(params={"how": how, "release": str(release)})).uid
    if how != "thread":
        record = service.wait(first, timeout=30)
        expected = {
            "globals": ("completed", "Completed", 0),
            "crash": ("error", "SIGSEGV", 139),
            "exit": ("error", "Error", 3),
        }[how]
        assert (record.state, record.reason, record.attempts[0].exit_code) == expected
    else:  # the run lasts as long as its thread, as a fresh interpreter's does
        wait_for(lambda: service.store.get(first).state == "running")
    served = server(service)
    after = service.wait(service.submit(check).uid, timeout=30)
    assert after.state == "completed", after.status_text
    result = dict(after.results["return"])
    assert result.pop("parent") == served  # the same server served both
    assert result == PRISTINE
    if how == "thread":
        assert service.store.get(first).state == "running"
        release.touch()
        record = service.wait(first, timeout=30)
        assert (record.state, record.results) == ("completed", {"return": "done"})
    assert server(service) == served
    assert running(served)


def test_the_server_holds_nothing_of_runplanes_environment(
    monkeypatch, settings, make_function, tmp_path
):
    monkeypatch.setenv("RUNPLANE_SERVICE_TOKEN_FOR_TEST", "s3cret-token-value")
    service = EmbeddedService(load_settings()).start()
    try:
        fn = make_function("""
            import os

            def handler(context):
                with open("/proc/self/environ", "rb") as file:
                    started_with = file.read().decode()
                return {"started_with": started_with, "now": dict(os.environ)}
        """)
        record = service.wait(service.submit(fn).uid, timeout=30)
        assert record.state == "completed", record.status_text
        seen = record.results["return"]
        assert "s3cret" not in seen["started_with"]
        assert "s3cret" not in str(seen["now"])
        assert seen["now"]["HOME"].endswith("/home")  # the run's own environment
        served = server(service)
        assert running(served)  # and it was a warm run
    finally:
        service.close()
    wait_for(lambda: not running(served))  # the server ends with the runtime


def test_a_run_whose_server_dies_ends_and_the_next_gets_a_new_one(service, make_function):
    sleeper = make_function("""
        import time

        def handler(context):
            time.sleep(60)
    """)
    uid = service.submit(sleeper).uid
    wait_for(lambda: service.store.get(uid).state == "running")
    old = server(service)
    os.kill(old, signal.SIGKILL)
    record = service.wait(uid, timeout=30)
    assert record.state == "error"
    assert record.attempts[0].exit_code == 137
    after = service.wait(service.submit(make_function(WHERE, name="where")).uid, timeout=30)
    assert after.state == "completed", after.status_text
    new = server(service)
    assert new not in (old, 0)
    assert after.results["return"]["parent"] == new


def test_fresh_starts_a_new_interpreter_per_run(monkeypatch, make_function, private_home):
    monkeypatch.setenv("RUNPLANE_LOCAL__LAUNCHER", "fresh")
    service = EmbeddedService(load_settings()).start()
    try:
        record = service.wait(service.submit(make_function(WHERE)).uid, timeout=30)
        assert record.state == "completed", record.status_text
        assert record.results["return"] == {"parent": os.getpid(), "warm": False}
        assert service.runtime.launcher is None
        assert "local.launcher: fresh" in service.runtime.isolation
    finally:
        service.close()


def test_a_run_setting_what_only_a_starting_interpreter_reads_starts_fresh(service, make_function):
    fn = make_function("""
        import os, sys

        def handler(context):
            return {"parent": os.getppid(), "flag": sys.flags.hash_randomization}
    """)
    fn.set_env("PYTHONHASHSEED", "0")
    record = service.wait(service.submit(fn).uid, timeout=30)
    assert record.state == "completed", record.status_text
    assert record.results["return"] == {"parent": os.getpid(), "flag": 0}
    started = next(t for t in record.transitions if t.state == "running")
    assert "a fresh interpreter: its environment sets PYTHONHASHSEED" in started.message


def test_pythonpath_of_a_warm_run_is_on_its_path(service, make_function, tmp_path: Path):
    library = tmp_path / "lib"
    library.mkdir()
    (library / "helper_for_warm.py").write_text("VALUE = 42\n")
    fn = make_function("""
        def handler(context):
            import helper_for_warm
            return helper_for_warm.VALUE
    """)
    fn.set_env("PYTHONPATH", str(library))
    started = time.monotonic()
    record = service.wait(service.submit(fn).uid, timeout=30)
    assert record.state == "completed", record.status_text
    assert record.results == {"return": 42}
    assert time.monotonic() - started < 30


def test_supervising_running_runs_costs_next_to_nothing(service, make_function, tmp_path):
    """In a cgroup nothing is sampled: runplane sleeps until a run's process exits or an abort
    comes. Ten sleeping runs for two seconds cost runplane (and its fork server) well under 1%
    of a core each; the 50 ms sampling this replaced cost about 16%."""
    release = tmp_path / "release"
    fn = make_function("""
        import os, time

        def handler(context, release: str):
            while not os.path.exists(release):
                time.sleep(0.05)
    """).with_requests(cpu="10m", mem="32Mi")
    uids = [service.submit(fn, RunOptions(params={"release": str(release)})).uid for _ in range(10)]
    wait_for(lambda: all(service.store.get(uid).state == "running" for uid in uids), timeout=60)
    forkserver = psutil.Process(server(service))
    ours, theirs = time.process_time(), sum(forkserver.cpu_times()[:2])
    time.sleep(2.0)
    spent = time.process_time() - ours + sum(forkserver.cpu_times()[:2]) - theirs
    release.touch()
    for uid in uids:
        assert service.wait(uid, timeout=30).state == "completed"
    assert spent / 2.0 / 10 < 0.01, f"{spent:.3f} s of CPU for 10 runs over 2 s"

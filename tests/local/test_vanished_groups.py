"""A run's cgroup may vanish under any step that kills or counts it: the warm launcher's server
removes it as soon as the run's last process has exited, which an abort can race. Each step on
this machine's real hierarchies (v1, and v2's unified one) is driven into that race, and a run
whose supervision fails still ends.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from runplane.runtimes.local import cgroups
from runplane.runtimes.local.cgroups import files, steps, v1, v2
from runplane.runtimes.local.process import FreshProcess
from runplane.runtimes.local.supervise import Supervisor
from runplane.runtimes.local.watchdog import ProcessTable
from runplane.spec.run_options import RunOptions

from .test_cgroups import own_group, start_in
from .test_lifecycle import gone
from .test_local_runs import SLEEP, wait_for

Step = Callable[..., Any]

WITH_A_CHILD = """
import subprocess, time

def handler(context):
    subprocess.Popen(["sleep", "600"])
    time.sleep(600)
"""


class Race:
    """A step (``v1.write``, ``v1.read``, ``v2.write``) that, the first time it is taken on
    ``target`` (a control file's name, and the value written), first lets ``vanish`` make the
    group disappear: before the file is opened (the kernel answers ENOENT) or between its
    opening and its use (ENODEV). What the kernel answered is kept in ``errno``."""

    def __init__(
        self, real: Step, target: tuple[str, str | None], vanish: Callable[[], None], opened: bool
    ) -> None:
        self.real, self.target, self.vanish, self.opened = real, target, vanish, opened
        self.errno: int | None = None

    def __call__(self, path: str | os.PathLike[str], *value: str | int) -> Any:
        name, written = self.target
        aimed = Path(path).name == name and (not value or str(value[0]) == written)
        if self.errno is not None or not aimed:
            return self.real(path, *value)
        try:
            if not self.opened:
                self.vanish()
                return self.real(path, *value)
            fd = os.open(path, os.O_WRONLY if value else os.O_RDONLY)
            try:
                self.vanish()
                return os.write(fd, str(value[0]).encode()) if value else os.read(fd, 64)
            finally:
                os.close(fd)
        except OSError as error:
            self.errno = error.errno
            raise
        finally:
            self.errno = self.errno or -1


def vanish(group: cgroups.RunGroup, process: subprocess.Popen[bytes]) -> Callable[[], None]:
    """What the warm launcher's server does as a run's last process exits: reap it, find the
    group empty, count it and remove it (thawed first on v1, where the kill may have frozen
    it: a frozen process cannot exit)."""

    def now() -> None:
        process.kill()
        for directory in group.steps["dirs"]:
            if Path(directory).is_relative_to(own_group("freezer")):
                steps.write(Path(directory) / "freezer.state", "THAWED")
        process.wait()
        assert wait_for(lambda: steps.finish(group.steps) is not None, timeout=30)
        assert not any(Path(directory).exists() for directory in group.steps["dirs"])

    return now


RACES = [
    pytest.param("v1", v1, "write", ("freezer.state", "FROZEN"), id="v1-freeze"),
    pytest.param("v1", v1, "read", ("freezer.state", None), id="v1-wait-frozen"),
    pytest.param("v1", v1, "write", ("freezer.state", "THAWED"), id="v1-thaw"),
    pytest.param("v2", v2, "write", ("cgroup.kill", "1"), id="v2-kill"),
]


@pytest.mark.parametrize("opened", [False, True], ids=["ENOENT", "ENODEV"])
@pytest.mark.parametrize(("version", "module", "step", "target"), RACES)
def test_a_kill_that_finds_the_group_gone_at_any_step_ends_quietly(
    monkeypatch, version, module, step, target, opened
):
    if version == "v1":
        hierarchy = cgroups.open_hierarchy(1000)
        assert hierarchy.version == "cgroup v1", "this machine (as CI) has cgroup v1"
    else:
        found = cgroups.unified_mount()
        assert found is not None, "no cgroup2 hierarchy is mounted"
        hierarchy = cgroups.open_v2(*found, controllers=())
    group = hierarchy.create(f"run-vanishing-{version}", cgroups.Limits())
    if version == "v2":
        assert Path(group.path, "cgroup.kill").exists(), "Linux 5.14 or later is needed"
    process = start_in(group, "import time; time.sleep(600)")
    race = Race(getattr(module, step), target, vanish(group, process), opened)
    monkeypatch.setattr(module, step, race)
    try:
        group.kill()  # the step finds the group gone: no error, nothing left to kill
        assert race.errno == (errno.ENODEV if opened else errno.ENOENT)
        assert process.poll() is not None
        group.remove()  # and removing what is gone is done
        assert group.counters() == cgroups.Counters()
        assert not any(Path(directory).exists() for directory in group.steps["dirs"])
    finally:
        monkeypatch.undo()
        if process.poll() is None:
            process.kill()
            process.wait()
        group.kill()
        group.remove()
        hierarchy.close()


def test_freeze_and_kill_of_a_group_that_is_gone_does_nothing(tmp_path):
    hierarchy = cgroups.open_hierarchy(1000)
    group = hierarchy.create("run-gone", cgroups.Limits())
    freezer = next(
        Path(d) for d in group.steps["dirs"] if Path(d).is_relative_to(own_group("freezer"))
    )
    try:
        group.remove()
        v1.freeze_and_kill(freezer, 1.0)
        group.kill()
        group.remove()
        assert not freezer.exists()
    finally:
        hierarchy.close()


def test_a_group_left_frozen_by_a_runplane_that_died_is_killed_and_removed(tmp_path):
    """A runplane killed between an abort's freeze and its thaw leaves its run's group frozen
    on its own; the next runplane's sweep must still kill what is in it and remove it (a
    frozen group stays frozen when its parent thaws)."""
    top = own_group("freezer") / f"runplane-test-frozen-{os.getpid()}"
    run = top / "run-frozen"
    run.mkdir(parents=True)
    process = subprocess.Popen(["sleep", "600"])
    try:
        (run / "cgroup.procs").write_text(str(process.pid))
        (run / "freezer.state").write_text("FROZEN")
        assert wait_for(lambda: (run / "freezer.state").read_text().strip() == "FROZEN")
        v1.freeze_and_kill(top, 5.0)
        assert process.wait(timeout=10) == -9
        files.rmdir_tree(top)
        assert not top.exists()
    finally:
        for group in (run, top):  # a frozen process neither dies nor is reaped
            if group.exists():
                (group / "freezer.state").write_text("THAWED")
        process.kill()
        process.wait()
        files.rmdir_tree(top)


def test_killing_a_run_process_that_has_just_exited_keeps_its_exit():
    """An abort's kill that comes as the run's first process exits (not yet reaped) neither
    fails nor takes the exit from the supervisor's wait."""
    process = FreshProcess(subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]))
    try:
        assert wait_for(lambda: psutil.Process(process.pid).status() == psutil.STATUS_ZOMBIE)
        process.kill()
        assert process.wait().returncode == 3
        process.kill()  # after the wait: nothing to do
    finally:
        process.close()


def test_an_abort_racing_the_runs_exit_ends_it_aborted(monkeypatch, service, make_function):
    """The abort's kill freezes the run's group, and while it thaws it the run's last process
    exits and the group is removed (the kernel answers ENODEV): the run still ends aborted."""
    uid = service.submit(make_function(WITH_A_CHILD)).uid
    name = f"run-{uid}"
    freezer = own_group("freezer") / cgroups.executor_name() / name
    # Its child outlives its first process (which SIGTERM ends), so the kill of what is left
    # freezes the group.
    wait_for(lambda: len(files.processes_in([freezer])) >= 2, timeout=60)

    def exit_and_removal() -> None:
        steps.write(freezer / "freezer.state", "THAWED")  # the run's SIGKILL is delivered
        assert wait_for(lambda: not files.processes_in([freezer]), timeout=30)
        for controller in v1.CONTROLLERS:
            files.rmdir_tree(own_group(controller) / cgroups.executor_name() / name)

    race = Race(v1.write, ("freezer.state", "THAWED"), exit_and_removal, opened=True)
    monkeypatch.setattr(v1, "write", race)
    service.abort(uid)
    record = service.wait(uid, timeout=60)
    assert race.errno == errno.ENODEV  # the race was run, and the kernel answered so
    assert record.state == "aborted", record.status_text
    assert record.attempts[-1].exit_code == 128 + 15  # its first process ended on SIGTERM


def test_a_run_whose_supervision_fails_ends_with_the_cause_and_its_processes_stopped(
    monkeypatch, service, make_function
):
    """In a cgroup: the wait for the run's end fails; the run ends in error saying why, and its
    processes and its group are gone."""

    def broken(*args: object) -> None:
        raise RuntimeError("the wait broke")

    monkeypatch.setattr(Supervisor, "_await_exit", broken)
    uid = service.submit(make_function(SLEEP), RunOptions(params={"seconds": 600})).uid
    record = service.wait(uid, timeout=60)
    assert record.state == "error"
    pid = record.attempts[-1].process_id
    assert pid is not None
    assert wait_for(lambda: gone(pid), timeout=30)
    assert not (own_group("memory") / cgroups.executor_name() / f"run-{uid}").exists()
    assert record.reason == "ExecutorError"
    assert record.status_text == (
        "runplane failed to supervise the run (RuntimeError: the wait broke); its processes "
        "were stopped"
    )


@pytest.mark.parametrize("isolation", ["watchdog"], indirect=True)
def test_a_watched_run_whose_supervision_fails_ends_and_is_stopped(
    monkeypatch, isolation, service, make_function
):
    """Under the watchdog: measuring the run fails while it runs; the run ends in error saying
    why, and its process does not run on unsupervised."""
    measured = []

    def broken(self: ProcessTable, pid: int) -> int:
        measured.append(pid)
        raise RuntimeError("measuring broke")

    monkeypatch.setattr(ProcessTable, "rss", broken)
    uid = service.submit(make_function(SLEEP), RunOptions(params={"seconds": 600})).uid
    record = service.wait(uid, timeout=60)
    assert record.state == "error"
    assert measured
    assert wait_for(lambda: gone(measured[0]), timeout=30)
    assert record.reason == "ExecutorError"
    assert "(RuntimeError: measuring broke); its processes were stopped" in record.status_text

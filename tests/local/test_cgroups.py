"""Limits enforced by the kernel: each run in a real cgroup of its own (v1 on this machine).

Numbers the tests measure are printed (``pytest -s``) as ``measured: ...`` lines.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from runplane.config import load_settings
from runplane.runtimes.local import cgroups
from runplane.runtimes.local.cgroups import steps
from runplane.service.embedded import EmbeddedService
from runplane.spec.run_options import RunOptions

from .test_lifecycle import DAEMON, read_pid
from .test_local_runs import SLEEP, wait_for

MiB = 2**20


def measured(what: str, value: str) -> None:
    sys.stdout.write(f"measured: {what}: {value}\n")


def await_exit(pid: int, timeout: float) -> float:
    """Seconds until process ``pid`` (any process, not only a child) exits, woken by the
    kernel through a pidfd; fails after ``timeout``."""
    started = time.monotonic()
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return 0.0
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    assert ready, f"process {pid} still alive after {timeout} s"
    return time.monotonic() - started


def own_group(controller: str) -> Path:
    """This test process's cgroup directory in a v1 controller's hierarchy."""
    own = next(
        line.split(":", 2)[2]
        for line in Path("/proc/self/cgroup").read_text().splitlines()
        if controller in line.split(":")[1].split(",")
    )
    return Path("/sys/fs/cgroup", controller, own.lstrip("/"))


#: A process waits at this gate until it is in its group, then becomes its program.
GATE = 'read -r go; [ "$go" = go ] || exit 125; exec "$0" "$@" </dev/null'


def start_in(group: cgroups.RunGroup, code: str, **popen: Any) -> subprocess.Popen[bytes]:
    """``python -c code`` started in ``group`` before it runs anything, as runplane starts a
    run's first process."""
    process = subprocess.Popen(
        ["/bin/sh", "-c", GATE, sys.executable, "-c", code], stdin=subprocess.PIPE, **popen
    )
    group.add(process.pid)
    assert process.stdin is not None
    process.stdin.write(b"go\n")
    process.stdin.close()
    return process


def run_groups(controller: str = "memory") -> list[Path]:
    """The run groups this test process's runtimes have in a hierarchy."""
    return sorted((own_group(controller) / cgroups.executor_name()).glob("run-*"))


def test_a_fast_allocator_is_stopped_by_the_kernel_at_its_limit(service, make_function):
    fn = make_function("""
        def handler(context):
            hog = []
            while True:
                hog.append(b"x" * (16 * 2**20))   # 16 MiB, touched, as fast as it can
    """)
    fn.with_limits(mem="128Mi")
    uid = service.submit(fn).uid
    record = service.wait(uid, timeout=60)
    assert record.state == "error"
    assert record.reason == "OOMKilled"
    assert record.attempts[0].exit_code == 137
    assert record.status_text.startswith(
        "the run reached its memory limit 128Mi and the kernel killed it"
    )
    # The kernel never let it hold more than the limit: no overshoot.
    assert 96 * MiB < record.peak_memory_bytes <= 128 * MiB
    measured(
        "fast allocator at 128Mi",
        f"peak {record.peak_memory_bytes / MiB:.1f} MiB, overshoot "
        f"{(record.peak_memory_bytes / (128 * MiB) - 1) * 100:+.1f}%",
    )
    assert run_groups() == []  # its cgroup is gone with it


def test_pages_shared_by_forked_children_count_once(service, make_function):
    fn = make_function("""
        import os, time

        def handler(context):
            shared = b"s" * (100 * 2**20)            # 100 MiB, touched by the parent
            children = []
            for _ in range(4):
                pid = os.fork()
                if pid == 0:                          # each child reads all of it
                    total = sum(shared[i] for i in range(0, len(shared), 4096))
                    time.sleep(1)
                    os._exit(0 if total else 1)
                children.append(pid)
            return {"exits": [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in children]}
    """)
    fn.with_limits(mem="256Mi")
    record = service.wait(service.submit(fn).uid, timeout=60)
    assert record.state == "completed", record.status_text
    assert record.results["exits"] == [0, 0, 0, 0]
    # Five processes map the same 100 MiB: the cgroup charges it once (RSS would add ~500 MiB).
    assert 100 * MiB < record.peak_memory_bytes < 256 * MiB
    measured("100 MiB shared by 5 processes", f"peak {record.peak_memory_bytes / MiB:.1f} MiB")


@pytest.mark.parametrize("ending", ["completes", "aborted", "threshold"])
def test_a_daemon_is_gone_within_a_second_of_the_end(service, make_function, tmp_path, ending):
    pidfile = tmp_path / "daemon.pid"
    linger = 1.0 if ending == "completes" else 60.0
    thresholds = {"running": "1s"} if ending == "threshold" else {}
    uid = service.submit(
        make_function(DAEMON, name="daemonizer"),
        RunOptions(params={"pidfile": str(pidfile), "linger": linger}, state_thresholds=thresholds),
    ).uid
    daemon = read_pid(pidfile)
    main = wait_for(lambda: (r := service.store.get(uid)).attempts and r.attempts[0].process_id)
    # It left the run's process tree and session, but not the run's cgroup.
    stat = Path(f"/proc/{daemon}/stat").read_text().rsplit(")", 1)[1].split()
    assert int(stat[1]) != main  # fields after the name: state, ppid, pgrp, session
    assert int(stat[3]) != main
    assert f"/run-{uid}" in Path(f"/proc/{daemon}/cgroup").read_text()
    asked = time.time()
    if ending == "aborted":
        service.abort(uid)
    await_exit(daemon, timeout=30.0)
    gone = time.time()
    record = service.wait(uid, timeout=30)
    assert record.state == ("completed" if ending == "completes" else "aborted")
    # Killed with the run's cgroup, before the run's end was even recorded.
    assert gone - record.ended_at < 1.0
    measured(
        f"daemon of a run that {ending}",
        f"gone {(gone - record.ended_at) * 1000:+.1f} ms from the recorded end"
        + (f", {(gone - asked) * 1000:.1f} ms after the abort" if ending == "aborted" else ""),
    )
    if ending == "aborted":
        assert gone - asked < 1.0
    assert run_groups() == []


def test_half_a_cpu_holds_two_busy_processes_to_half_a_core(service, make_function):
    fn = make_function("""
        import multiprocessing, time

        def spin(seconds):
            end = time.time() + seconds
            while time.time() < end:
                pass

        def handler(context):
            workers = [multiprocessing.Process(target=spin, args=(3,)) for _ in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
    """)
    fn.with_limits(cpu="500m")
    record = service.wait(service.submit(fn).uid, timeout=60)
    assert record.state == "completed", record.status_text
    (attempt,) = record.attempts
    wall = attempt.ended_at - attempt.started_at
    share = record.cpu_seconds / wall  # the cgroup's own CPU counter over the run's life
    measured("cpu 500m, two busy processes", f"{share:.3f} core over {wall:.2f} s")
    assert wall >= 3
    assert 0.2 < share <= 0.55


def test_a_fork_bomb_stops_at_the_pids_limit(monkeypatch, make_function):
    monkeypatch.setenv("RUNPLANE_LOCAL__PIDS_LIMIT", "64")
    service = EmbeddedService(load_settings()).start()
    try:
        fn = make_function("""
            import os

            def handler(context):
                while True:
                    os.fork()
        """)
        fn.with_limits(mem="1Gi")
        started = time.monotonic()
        record = service.wait(service.submit(fn).uid, timeout=60)
        measured("fork bomb at pids.max 64", f"ended in {time.monotonic() - started:.2f} s")
        assert record.state == "error"
        assert record.reason == "PidsLimit"
        assert "BlockingIOError" in record.status_text
        assert "the run reached its limit of processes and threads (local.pids_limit)" in (
            record.status_text
        )
        assert run_groups() == []  # every process of the bomb is gone with its group
    finally:
        service.close()


def test_requests_and_limits_as_the_kubelet_sets_them(service, make_function):
    fn = make_function(SLEEP).with_requests(cpu="250m", mem="64Mi")
    fn.with_limits(cpu="1500m", mem="300Mi")
    uid = service.submit(fn, RunOptions(params={"seconds": 30})).uid
    wait_for(lambda: service.store.get(uid).state == "running")

    def read(controller: str, name: str) -> str:
        group = own_group(controller) / cgroups.executor_name() / f"run-{uid}"
        return (group / name).read_text().strip()

    # A warm run's process starts with what a fresh interpreter is charged, uncharged here:
    # its group holds it to the rest (runtimes/local/footprint.py).
    footprints = json.loads((service.settings.local.home / "footprints.json").read_text())
    limit = 300 * MiB - footprints.popitem()[1]
    assert read("memory", "memory.limit_in_bytes") == str(limit)
    assert read("memory", "memory.memsw.limit_in_bytes") == str(limit)  # no swap
    assert read("cpu", "cpu.cfs_quota_us") == "150000"
    assert read("cpu", "cpu.cfs_period_us") == "100000"
    assert read("cpu", "cpu.shares") == "256"  # 250m * 1024 / 1000
    assert read("pids", "pids.max") == "4096"
    assert read("freezer", "freezer.state") == "THAWED"
    # The run's process is in its group in every hierarchy, beneath this process's own.
    main = service.store.get(uid).attempts[0].process_id
    for controller in ("memory", "cpu", "cpuacct", "pids", "freezer"):
        assert str(main) in read(controller, "cgroup.procs").split()
    service.wait(service.abort(uid).uid, timeout=10)
    assert cgroups.cpu_shares(0) == 2
    assert cgroups.cpu_weight(cgroups.cpu_shares(1000)) == 39
    assert cgroups.cfs_quota(5) == 1000


def test_cgroup_v2_holds_and_kills_a_daemon(tmp_path):
    """The v2 implementation on this machine's unified hierarchy (no controllers there on a
    hybrid machine, so no limits: what it holds, counts and kills is v2's own)."""
    found = cgroups.unified_mount()
    assert found is not None, "no cgroup2 hierarchy is mounted"
    hierarchy = cgroups.open_v2(*found, controllers=())
    assert hierarchy.version == "cgroup v2"
    group = hierarchy.create("run-v2-test", cgroups.Limits())
    pidfile = tmp_path / "daemon.pid"
    code = textwrap.dedent(f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open({str(pidfile)!r}, "w").write(str(os.getpid()))
                time.sleep(600)
            os._exit(0)
        end = time.time() + 0.3
        while time.time() < end:
            pass
    """)
    process = start_in(group, code)
    try:
        assert process.wait(timeout=30) == 0
        daemon = read_pid(pidfile)
        assert group.counters().cpu_seconds > 0.05  # its own CPU time, counted by v2
        asked = time.monotonic()
        group.kill()
        measured("cgroup v2 kill", f"{(time.monotonic() - asked) * 1000:.1f} ms")
        await_exit(daemon, timeout=1.0)
        group.remove()
        hierarchy.close()
        assert not Path(found[0], cgroups.executor_name()).exists()
    finally:
        if process.poll() is None:
            process.kill()


def test_a_group_left_by_a_killed_runplane_is_removed_by_the_next(tmp_path):
    """A daemon outlives its executor's SIGKILL in the executor's cgroup; the next runplane
    started beside it kills it and removes the group."""
    pidfile = tmp_path / "daemon.pid"
    script = tmp_path / "executor.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, signal, subprocess, sys
        from runplane.runtimes.local import cgroups
        group = cgroups.open_hierarchy(1000).create("run-orphan", cgroups.Limits())
        gate = 'read -r go; [ "$go" = go ] || exit 125; exec "$0" "$@" </dev/null'
        code = (
            "import os, time\\n"
            "if os.fork() == 0:\\n"
            "    os.setsid()\\n"
            "    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\\n"
            "    time.sleep(600)\\n"
        )
        child = subprocess.Popen(["/bin/sh", "-c", gate, sys.executable, "-c", code],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        group.add(child.pid)
        child.stdin.write(b"go\\n")
        child.stdin.close()
        child.wait()
        while not os.path.exists({str(pidfile)!r}) or not open({str(pidfile)!r}).read():
            pass
        print(cgroups.executor_name(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    left = done.stdout.strip()
    daemon = read_pid(pidfile)
    assert f"/{left}/run-orphan" in Path(f"/proc/{daemon}/cgroup").read_text()
    hierarchy = cgroups.open_hierarchy(1000)  # the next runplane here
    try:
        await_exit(daemon, timeout=1.0)
        for controller in ("memory", "cpu", "cpuacct", "pids", "freezer"):
            assert not (own_group(controller) / left).exists()
    finally:
        hierarchy.close()


def test_groups_a_run_made_beneath_its_own_are_killed_and_removed(tmp_path):
    """A run that runs as root may make groups beneath its own and move a daemon there: the
    end still finds the daemon (v1's pids count covers the groups beneath, so the group is not
    taken for empty) and removes every group, deepest first."""
    hierarchy = cgroups.open_hierarchy(1000)
    group = hierarchy.create("run-nested-test", cgroups.Limits())
    inner = [
        own_group(controller) / cgroups.executor_name() / "run-nested-test" / "inner"
        for controller in ("memory", "pids", "freezer")
    ]
    pidfile = tmp_path / "daemon.pid"
    code = textwrap.dedent(f"""
        import os, time
        for directory in {[str(d) for d in inner]!r}:
            os.mkdir(directory)
        if os.fork() == 0:
            os.setsid()
            for directory in {[str(d) for d in inner]!r}:
                open(os.path.join(directory, "cgroup.procs"), "w").write(str(os.getpid()))
            open({str(pidfile)!r}, "w").write(str(os.getpid()))
            time.sleep(600)
    """)
    process = start_in(group, code)
    try:
        assert process.wait(timeout=30) == 0
        daemon = read_pid(pidfile)
        assert "/run-nested-test/inner" in Path(f"/proc/{daemon}/cgroup").read_text()
        group.kill()
        await_exit(daemon, timeout=1.0)
        group.remove()
        assert not any(directory.parent.exists() for directory in inner)
    finally:
        if process.poll() is None:
            process.kill()
        hierarchy.close()


def finish_once_emptied(group: cgroups.RunGroup, code: str) -> dict[str, Any]:
    """Run ``python -c code`` (which prints a line once it has done its work, then sleeps) in
    ``group``; the group's steps must refuse to finish it while the process runs, and finish
    it once the process is killed. Returns what finishing found."""
    sleeper = start_in(group, code, stdout=subprocess.PIPE)
    try:
        assert sleeper.stdout is not None
        sleeper.stdout.readline()
        assert steps.finish(group.steps) is None  # something runs there: runplane's to end
        assert all(Path(directory).is_dir() for directory in group.steps["dirs"])
    finally:
        sleeper.kill()
        sleeper.wait()
    finished = steps.finish(group.steps)
    assert finished is not None
    return finished


def test_a_groups_steps_make_count_and_remove_it_only_once_it_is_empty():
    """What the warm launcher's server carries out for each run it forks: the group made with
    its limits, refused as unfinished while a process runs in it, then counted and removed."""
    hierarchy = cgroups.open_hierarchy(1000)
    group = hierarchy.group("run-steps-test", cgroups.Limits(memory=64 * MiB, pids=16))
    made = [Path(directory) for directory in group.steps["dirs"]]
    try:
        steps.make(group.steps)
        assert all(directory.is_dir() for directory in made)
        assert (own_group("memory") / cgroups.executor_name() / "run-steps-test").is_dir()
        with pytest.raises(FileExistsError):  # made once: a second make refuses, leaving it
            steps.make(group.steps)
        assert all(directory.is_dir() for directory in made)
        code = "import sys, time; held = bytearray(8 << 20); print(flush=True); time.sleep(600)"
        finished = finish_once_emptied(group, code)  # it held its 8 MiB
        assert finished["removed"]
        counted = group.counted(finished["counters"])
        assert counted.cpu_seconds > 0  # its interpreter's start, counted by the kernel
        assert counted.peak_memory > 8 * MiB
        assert not any(directory.exists() for directory in made)
    finally:
        group.kill()
        group.remove()
        hierarchy.close()


def test_a_v2_groups_steps_remove_it_only_once_it_is_not_populated():
    """The same steps on cgroup v2 (this machine's unified hierarchy): its emptiness is
    ``cgroup.events``' ``populated 0``."""
    found = cgroups.unified_mount()
    assert found is not None, "no cgroup2 hierarchy is mounted"
    hierarchy = cgroups.open_v2(*found, controllers=())
    group = hierarchy.group("run-v2-steps-test", cgroups.Limits())
    made = Path(group.steps["dirs"][0])
    try:
        steps.make(group.steps)
        assert made.is_dir()
        finished = finish_once_emptied(group, "import time; print(flush=True); time.sleep(600)")
        assert finished["removed"]
        assert group.counted(finished["counters"]).cpu_seconds > 0
        assert not made.exists()
    finally:
        group.kill()
        group.remove()
        hierarchy.close()

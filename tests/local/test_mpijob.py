"""mpijob on this machine: real ranks under Open MPI's mpirun, granted whole by the ledger."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil
import pytest

from runplane.service.embedded import EmbeddedService
from runplane.spec import Function
from runplane.spec.run_options import RunOptions

ALLREDUCE = """
def train(context, scale: int = 1):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    total = comm.allreduce((context.rank + 1) * scale, op=MPI.SUM)
    context.logger.info("rank %d of %d: total %d", context.rank, context.world_size, total)
    context.log_result(f"seen_by_rank_{context.rank}", total)
    return {"total": total, "world_size": comm.Get_size(), "logging": context.is_logging_worker()}
"""


def _mpijob(make_function: Callable[..., Function], code: str, replicas: int = 2) -> Function:
    fn = make_function(code, handler="train", name="trainer", kind="mpijob")
    fn.spec.replicas = replicas
    return fn.with_requests(cpu="500m", mem="64Mi").with_limits(cpu="1", mem="1Gi")


def test_two_ranks_allreduce_and_rank_zero_logs_the_results(
    make_function: Callable[..., Function], service: EmbeddedService
):
    fn = _mpijob(make_function, ALLREDUCE)
    record = service.wait(service.submit(fn, RunOptions(params={"scale": 10})).uid, timeout=120)
    assert record.state == "completed", record.status_text
    # Ranks 1 and 2 (times 10) sum to 30 on every rank; only rank 0's results are recorded.
    returned = {"total": 30, "world_size": 2, "logging": True}
    assert record.results == {"seen_by_rank_0": 30, **returned, "return": returned}
    output = service.logs(record.uid)[0].decode()
    assert "rank 0 of 2: total 30" in output
    assert "rank 1 of 2: total 30" in output
    # The requests recorded are a worker's; the ledger granted both ranks at once.
    assert record.requests == {"cpu": "500m", "memory": "64Mi"}


def test_one_rank_failing_ends_the_run_with_that_ranks_reason(
    make_function: Callable[..., Function], service: EmbeddedService
):
    code = """
    import time

    def train(context):
        if context.rank == 1:
            raise ValueError("bad shard")
        time.sleep(60)
    """
    fn = _mpijob(make_function, code)
    started = time.monotonic()
    record = service.wait(service.submit(fn).uid, timeout=120)
    assert time.monotonic() - started < 50  # rank 0 did not sleep on
    assert record.state == "error"
    assert record.status_text.endswith("rank 1: ValueError: bad shard"), record.status_text


def test_an_abort_ends_every_rank(make_function: Callable[..., Function], service: EmbeddedService):
    code = """
    import os, time

    def train(context):
        context.logger.info("rank %d pid %d", context.rank, os.getpid())
        time.sleep(120)
    """
    fn = _mpijob(make_function, code)
    uid = service.submit(fn).uid
    deadline = time.monotonic() + 60
    while service.logs(uid)[0].decode().count(" pid ") < 2:
        assert time.monotonic() < deadline, service.logs(uid)[0]
        time.sleep(0.1)
    pids = [
        int(line.rsplit(" ", 1)[1])
        for line in service.logs(uid)[0].decode().splitlines()
        if " pid " in line
    ]
    service.abort(uid)
    record = service.wait(uid, timeout=60)
    assert record.state == "aborted"
    assert not [
        pid
        for pid in pids
        if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    ]


def test_ranks_that_cannot_all_fit_wait_whole_with_the_reason(
    make_function: Callable[..., Function], service: EmbeddedService
):
    fn = _mpijob(make_function, ALLREDUCE, replicas=3).with_requests(cpu="1", mem="64Mi")
    record = service.submit(fn)
    deadline = time.monotonic() + 30
    while "Insufficient cpu" not in service.get(record.uid).status_text:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # 3 ranks x 1 CPU on a 2-CPU machine: the gang never fits, none of it starts.
    assert service.get(record.uid).state == "pending"
    assert (
        "it asks for cpu 3, and this machine has cpu 2 in all"
        in service.get(record.uid).status_text
    )
    service.abort(record.uid)


def test_mpijob_without_replicas_runs_one_rank(
    make_function: Callable[..., Function], service: EmbeddedService
):
    fn = make_function(ALLREDUCE, handler="train", name="single", kind="mpijob")
    record = service.wait(service.submit(fn).uid, timeout=120)
    assert record.state == "completed", record.status_text
    assert record.results["world_size"] == 1
    fn.spec.replicas = 0
    with pytest.raises(Exception, match="an mpijob needs at least one worker"):
        service.submit(fn)


def test_the_cli_runs_and_renders_an_mpijob(tmp_path):
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(ALLREDUCE))
    command = [sys.executable, "-m", "runplane.cli.main"]
    ran = subprocess.run(
        [*command, "run", str(script), "--handler", "train", "--kind", "mpijob", "--replicas", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert "total=3" in ran.stdout
    rendered = subprocess.run(
        [
            *command,
            "render",
            str(script),
            "--handler",
            "train",
            "--kind",
            "mpijob",
            "--replicas",
            "2",
            "--cpu",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: MPIJob" in rendered.stdout
    assert "# QoS class: Burstable" in rendered.stdout

"""Runs of several processes granted together here: an mpijob's ranks under ``mpirun``, and a
spark application's local mode (its executors inside the driver's process tree).

An mpijob of ``replicas`` workers is one claim on the capacity ledger for all its ranks (their
requests summed, their cores and GPUs together), so it starts whole or waits whole: the
ledger decides it in one transaction, and half a job never holds cores or GPUs while the rest
waits. Its memory limit is the run's, ``replicas`` times a worker's, enforced on the whole
process tree (``mpirun`` and every rank): ranks are started by ``mpirun`` as its own children,
and one limit for the tree is what this machine can enforce on them without a cgroup per
rank. Each rank is confined to its own share of the granted cores and GPUs
(:mod:`runplane.runtimes.local.rank`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys

from runplane.errors import NotFoundError
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.local.launch import LocalRun

RANK_MODULE = "runplane.runtimes.local.rank"


def prepare(run: LocalRun, request: RunRequest) -> LocalRun:
    """``run`` as ``request.replicas`` processes under ``mpirun``; a single process as is."""
    if "PYSPARK_SUBMIT_ARGS" in run.env and "PYSPARK_PYTHON" not in run.env:
        # pyspark's local mode starts Python workers; they must be the run's own Python.
        run = dataclasses.replace(run, env={**run.env, "PYSPARK_PYTHON": sys.executable})
    replicas = request.replicas
    if replicas == 1 and request.pod.get("kind") != "MPIJob":
        return run
    mpirun = shutil.which("mpirun", path=run.env.get("PATH") or os.environ.get("PATH"))
    if mpirun is None:
        raise NotFoundError(
            "mpirun: an mpijob runs its ranks with Open MPI's mpirun, which is not installed "
            "here (apt-get install openmpi-bin libopenmpi-dev; scripts/runtime-deps.sh does it)"
        )
    requirements = dataclasses.replace(
        run.requirements,
        requests={name: amount * replicas for name, amount in run.requirements.requests.items()},
    )
    launcher = [mpirun, "-np", str(replicas), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        launcher.append("--allow-run-as-root")
    # Shared memory between ranks; single-copy needs ptrace rights a sandbox may not grant.
    launcher += ["--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none"]
    return dataclasses.replace(
        run,
        requirements=requirements,
        memory_limit=None if run.memory_limit is None else run.memory_limit * replicas,
        cores=run.cores * replicas,
        gpus=run.gpus * replicas,
        launcher=[*launcher, sys.executable, "-m", RANK_MODULE],
    )

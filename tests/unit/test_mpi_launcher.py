"""An mpijob's launcher as its pod runs it: ``mpirun`` (here a stand-in that starts the ranks
as processes of this machine, each the shipped bootstrap with Open MPI's rank variables), its
output passed on, and the run's report on the output's last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from runplane import names
from runplane.bootstrap import RESULTS_MARKER, Invocation
from runplane.rendering.mpijob import LAUNCHER_PROGRAM
from tests.unit.test_bootstrap import shipped

#: ``mpirun -np N``: N ranks at once, their output interleaved, a failure's notice after them,
#: the exit code of the first rank that failed.
MPIRUN = """
import os, subprocess, sys
size = int(sys.argv[1])
ranks = [
    subprocess.Popen(
        sys.argv[2:],
        env={**os.environ, "OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": str(size)},
    )
    for r in range(size)
]
codes = [c if c >= 0 else 128 - c for c in (rank.wait() for rank in ranks)]
failed = [c for c in codes if c]
if failed:
    print("mpirun detected that one or more processes exited with non-zero status", flush=True)
sys.exit(failed[0] if failed else 0)
"""


def launch(
    tmp_path: Path, code: str, size: int = 2
) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = shipped(tmp_path / "bootstrap")
    mpirun = tmp_path / "mpirun.py"
    mpirun.write_text(MPIRUN)
    invocation = Invocation("u1", "p", "f", "train", code, "train.py")
    termination = tmp_path / "termination-log"
    env = {
        "PATH": os.environ["PATH"],
        **invocation.to_env(),
        names.ENV_RUN_DIR: str(tmp_path / "run"),
        "RUNPLANE_TERMINATION_LOG": str(termination),
    }
    program = LAUNCHER_PROGRAM.replace(repr(names.BOOTSTRAP_DIR), repr(str(script.parent)))
    assert program != LAUNCHER_PROGRAM
    argv = [sys.executable, "-I", "-S", "-c", program, sys.executable, str(mpirun), str(size)]
    argv += [sys.executable, "-I", "-S", str(script)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    return done, termination


def report(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    last = done.stdout.rstrip("\n").splitlines()[-1]
    assert last.startswith(RESULTS_MARKER), done.stdout
    parsed: dict[str, object] = json.loads(last.removeprefix(RESULTS_MARKER))
    return parsed


def test_rank_0_s_results_end_the_launcher_s_output(tmp_path):
    code = (
        "def train(context):\n"
        "    print(f'rank {context.rank} of {context.world_size}', flush=True)\n"
        "    return context.rank + 7\n"
    )
    done, termination = launch(tmp_path, code)
    assert done.returncode == 0, done.stdout + done.stderr
    assert report(done) == {"results": {"return": 7}, "artifacts": []}
    assert "rank 0 of 2" in done.stdout
    assert "rank 1 of 2" in done.stdout
    assert done.stdout.count(RESULTS_MARKER) == 1  # the ranks' own lines are held back
    assert json.loads(termination.read_text()) == {"results_in_log": True}


def test_a_rank_that_raises_fails_the_run_naming_the_rank(tmp_path):
    code = (
        "def train(context):\n"
        "    if context.rank == 1:\n"
        "        raise ValueError('no data on this rank')\n"
        "    return context.rank + 7\n"
    )
    done, termination = launch(tmp_path, code)
    assert done.returncode == 1
    assert report(done)["error"] == "rank 1: ValueError: no data on this rank"
    assert "mpirun detected" in done.stdout  # mpirun's own notice is output
    assert json.loads(termination.read_text()) == {"results_in_log": True}


def test_a_rank_killed_before_it_reported_fails_the_run_with_mpirun_s_code(tmp_path):
    code = (
        "import os, signal\n"
        "def train(context):\n"
        "    if context.rank == 1:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return context.rank + 7\n"
    )
    done, _ = launch(tmp_path, code)
    assert done.returncode == 137
    assert report(done) == {
        "results": {"return": 7},
        "artifacts": [],
        "error": "mpirun exited with code 137",
    }

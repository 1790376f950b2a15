"""bench/retention.py, scaled down: a retention pass over a few hundred expired runs removes
every one of them and leaves the live run's record readable throughout (a smoke check of the
benchmark, not a timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmarks_pass_removes_every_expired_run_and_keeps_the_live_one(
    database: str,
) -> None:
    server = [] if database.startswith("sqlite") else ["--url", database]
    command = [sys.executable, "bench/retention.py", "--runs", "300", "--batch", "50", *server]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    engine = "sqlite" if database.startswith("sqlite") else "postgresql"
    assert f"{engine}: removed 300 runs in" in done.stdout, done.stdout
    assert "reads of a run's record during the pass:" in done.stdout, done.stdout

"""Helpers every benchmark shares: timing fresh interpreters and printing reproducible numbers."""

from __future__ import annotations

import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence


def fresh_interpreter_seconds(python: str, code: str, runs: int) -> list[float]:
    """Seconds ``code`` takes inside a new interpreter, measured in that interpreter.

    The clock runs inside the child so interpreter start-up is excluded and only the import
    (or call) under test is counted.
    """
    probe = (
        f"import time\n_start = time.perf_counter()\n{code}\nprint(time.perf_counter() - _start)\n"
    )
    samples = []
    for _ in range(runs):
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
        samples.append(float(done.stdout.strip().splitlines()[-1]))
    return samples


def summary(samples: Sequence[float], unit: float = 1000.0, suffix: str = "ms") -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"median {statistics.median(ordered) * unit:.1f} {suffix}, min {ordered[0] * unit:.1f}, "
        f"p90 {p90 * unit:.1f} (n={len(ordered)})"
    )


def header(title: str) -> None:
    print(f"# {title}")
    print(f"command: {' '.join([sys.executable.rsplit('/', 1)[-1], *sys.argv])}")
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}"
    )

"""What live right-sizing saves a job that outgrows its memory limit, on the embedded default:
a job that does ``--work`` seconds of work while its memory grows from ~100 MiB to ~300 MiB under
a 128Mi limit, run with ``with_autoresize`` (resized in place) and, as its peer in the same run,
without it (OOM-killed, retried from the beginning with 4x the memory). Prints each one's wall
time from submission to completion, its attempts and resizes, the CPU the job's attempts used
in all, and the ratio of the two.

Run from the repository root, under the machine's benchmark lock:
    flock /tmp/runplane-bench.lock python bench/live_resize.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import header

import runplane
from runplane.config import load_settings
from runplane.service.embedded import EmbeddedService
from runplane.spec.run_options import RunOptions
from tests.growing import GROWING


def run_once(home: Path, autoresize: bool, pause: float) -> tuple[float, int, int, float]:
    """(seconds to completion, attempts, resizes applied, CPU seconds of every attempt)."""
    code = home / "growing.py"
    code.write_text(GROWING)
    fn = runplane.code_to_function("growing", filename=str(code), handler="handler")
    fn.with_requests(mem="64Mi").with_limits(mem="128Mi")
    if autoresize:
        fn.with_autoresize(max_mem="1Gi", step=2, window="0.5s")
    else:
        fn.with_retries(2, on=["oom"], backoff=0, memory_factor=4)
    params = {"pause": str(pause), "room_wait": "120" if autoresize else "0"}
    service = EmbeddedService(load_settings()).start()
    try:
        start = time.monotonic()
        record = service.wait(service.submit(fn, RunOptions(params=params)).uid, timeout=600)
        took = time.monotonic() - start
    finally:
        service.close()
    assert record.state == "completed", record.status_text
    applied = sum(1 for r in record.resizes if r.applied)
    cpu = sum(a.cpu_seconds for a in record.attempts)
    return took, len(record.attempts), applied, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=float, default=20.0, help="seconds of growth per attempt")
    arguments = parser.parse_args()
    header("live right-sizing against an OOM retry, embedded default")
    pause = arguments.work / 20  # 20 steps of 10 MiB
    with tempfile.TemporaryDirectory() as directory:
        os.environ["RUNPLANE_LOCAL__HOME"] = str(Path(directory) / "home")
        os.environ["RUNPLANE_LOCAL__MEMORY"] = "4Gi"
        resized = run_once(Path(directory), True, pause)
        retried = run_once(Path(directory), False, pause)
    for name, (took, attempts, applied, cpu) in (
        ("autoresize (in place)", resized),
        ("OOM retry (x4 memory)", retried),
    ):
        print(
            f"{name:24} {took:6.1f} s to completion, {attempts} attempt(s), "
            f"{applied} resize(s), {cpu:.2f} CPU s"
        )
    print(f"ratio (OOM retry / autoresize): {retried[0] / resized[0]:.2f}x wall time")


if __name__ == "__main__":
    main()

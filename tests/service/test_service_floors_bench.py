"""bench/service_floors.py, scaled down: each of the three layers it measures answers (the
framework's three apps and runplane's own API take the run's submission, both clients POST the
pod over TLS, the record is written one and several to a transaction) and a number comes back
for each (a smoke check of the benchmark, not a timing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_measures_each_layer_and_its_alternatives() -> None:
    command = [sys.executable, "bench/service_floors.py", "--requests", "300", "--records", "80"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = re.compile(r"^  (\S+(?: per transaction)?)\s+([\d.]+) ms", re.M)
    measured = {name: float(ms) for name, ms in line.findall(done.stdout)}
    expected = {"fastapi_app", "starlette_app", "bare_app", "service_route_app", "service_app"}
    expected |= {"urllib3", "http.client"}
    expected |= {f"{runs} per transaction" for runs in (1, 4, 8)}
    assert set(measured) == expected, done.stdout
    # 300 requests: enough of the server's CPU for the system's 10 ms ticks to count some
    assert all(ms > 0 for ms in measured.values()), done.stdout
    frames = re.search(r"\(([\d.]+) WAL frames for a run alone\)", done.stdout)
    assert frames is not None, done.stdout
    assert float(frames.group(1)) >= 3, done.stdout  # the row, an index, the count at least

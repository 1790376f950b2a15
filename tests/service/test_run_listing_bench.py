"""bench/run_listing.py, scaled down: its runs loaded straight into the database, a real
``runplane serve`` on them, and every query it times answering what the runs as generated
say, through the API, the CLI and the UI (a smoke check of the benchmark, not a timing)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("run_listing", ROOT / "bench" / "run_listing.py")
assert _spec is not None
assert _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["run_listing"] = bench
_spec.loader.exec_module(bench)


def test_the_benchmarks_queries_answer_as_its_runs_say(
    database: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spread = bench.generate(5000)
    bench.load(database, spread)
    process, base = bench.start(database, tmp_path)
    try:
        assert bench.check(base, spread) == []
        assert bench.check_cli(base, spread) == []
        assert bench.check_ui(base, spread) == []
        bench.time_idle(psutil.Process(process.pid), database, 0.5)
        idle = capsys.readouterr().out
        assert "idle 0.5 s: the service's CPU" in idle
        assert ("PostgreSQL's" in idle) == database.startswith("postgresql"), idle
        # Chromium's part runs through (each page loads, each swap in place comes), the swaps
        # also in a tab served a baseline script (here the same one).
        script = ROOT / "src" / "runplane" / "ui" / "static" / "runplane.js"
        bench.time_ui_browser(base, spread, 2, baseline_script=script)
        printed = capsys.readouterr().out
        assert printed.count("| Next page, clicked 10 times from the first |") == 4
        assert printed.count("| State chosen in the filters, error and running in turn |") == 4
        assert printed.count("against the baseline script |") == 4
    finally:
        process.terminate()
        process.wait(timeout=60)

"""Retention: how fast a pass removes expired runs, and what a read of the run store waits
meanwhile.

It records N finished runs (past their age) and one live run in a fresh database, then makes
one retention pass (``service/retention.py``) while a second thread reads the live run's
record over and over, as the API would. It prints the runs removed per second, the longest
batch, and the reads' p50/p99/max during the pass, against the same reads before it.

Run from the repository root:
    python bench/retention.py                                   # SQLite, 20,000 runs
    python bench/retention.py --runs 100000 --batch 200
    python bench/retention.py --url postgresql+psycopg://runplane@127.0.0.1:55432/postgres
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sqlalchemy import create_engine, insert, text

from runplane.service.db import connect, sqlite_url
from runplane.service.db.models import RUNS
from runplane.service.records import RunStore
from runplane.service.retention import Retention
from runplane.spec.retention import RetentionPolicy

NOW = 2_000_000_000.0


def fresh_database(url: str | None, directory: Path) -> str:
    if url is None:
        return sqlite_url(directory / "bench.db")
    name = f"runplane_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return url.rsplit("/", 1)[0] + f"/{name}"


def row(uid: str, state: str, ended: float | None, index: int) -> dict[str, Any]:
    created = NOW - 100 * 86400 + index
    return {
        "uid": uid,
        "project": f"p{index % 10}",
        "name": "job",
        "runtime": "local",
        "state": state,
        "function": {},
        "created_at": created,
        "updated_at": created,
        "state_since": created,
        "ended_at": ended,
    }


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def reads(store: RunStore, uid: str, until: threading.Event) -> list[float]:
    took: list[float] = []
    while not until.is_set():
        start = time.perf_counter()
        store.get(uid)
        took.append(time.perf_counter() - start)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--url", help="a PostgreSQL server's URL (default: SQLite in a temp dir)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        engine = connect(fresh_database(arguments.url, Path(directory)))
        live = uuid.uuid4().hex
        with engine.begin() as connection:
            connection.execute(insert(RUNS), [row(live, "running", None, 0)])
            for first in range(0, arguments.runs, 10_000):
                rows = [
                    row(uuid.uuid4().hex, "completed", NOW - 30 * 86400, i)
                    for i in range(first, min(first + 10_000, arguments.runs))
                ]
                connection.execute(insert(RUNS), rows)
        store = RunStore(engine)
        idle = threading.Event()
        timer = threading.Timer(2.0, idle.set)
        timer.start()
        before = reads(store, live, idle)
        batches: list[float] = []
        last = [time.perf_counter()]

        def between() -> bool:
            now = time.perf_counter()
            batches.append(now - last[0])
            last[0] = now
            return False

        done = threading.Event()
        during: list[float] = []
        reader = threading.Thread(target=lambda: during.extend(reads(store, live, done)))
        reader.start()
        start = time.perf_counter()
        swept = Retention(engine, Path(directory) / "runs", arguments.batch).sweep(
            RetentionPolicy(runs_max_age="1d"), {}, NOW, stop=between
        )
        elapsed = time.perf_counter() - start
        done.set()
        reader.join()
        assert swept.runs == arguments.runs, swept
        assert store.get(live).uid == live
        database = "sqlite" if arguments.url is None else "postgresql"
        print(f"command: python bench/retention.py {' '.join(sys.argv[1:])}")
        print(
            f"{database}: removed {swept.runs} runs in {elapsed:.2f} s "
            f"({swept.runs / elapsed:.0f} runs/s), batches of {arguments.batch}: "
            f"longest {max(batches) * 1000:.1f} ms, "
            f"median {statistics.median(batches) * 1000:.1f} ms"
        )
        for label, values in (("before", before), ("during", during)):
            print(
                f"reads of a run's record {label} the pass: {len(values)} reads, "
                f"p50 {percentile(values, 0.5) * 1000:.2f} ms, "
                f"p99 {percentile(values, 0.99) * 1000:.2f} ms, max {max(values) * 1000:.2f} ms"
            )
        engine.dispose()


if __name__ == "__main__":
    main()

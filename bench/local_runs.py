"""End-to-end overhead of the embedded default, and throughput of queued tiny runs.

Overhead: a no-op handler run through the whole path (call -> render -> record -> capacity
grant -> a new process -> handler -> recorded result), median over ``--runs`` sequential runs
in one process. Throughput: ``--queued`` tiny runs submitted at once, until all are recorded.
When a virtual environment with mlrun is available, the same no-op goes through mlrun's local
run in the same benchmark for the ratio.

    python bench/local_runs.py [--runs 50] [--queued 500] [--mlrun-python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import header, summary

NOOP = "def handler(context, x: int = 1):\n    return x\n"
DEFAULT_MLRUN = Path.home() / ".cache" / "runplane-bench" / "mlrun-venv" / "bin" / "python"
MLRUN_PROBE = textwrap.dedent("""
    import json, sys, time, mlrun
    fn = mlrun.code_to_function("noop", filename=sys.argv[1], kind="job", handler="handler")
    fn.run(params={"x": 2}, local=True, artifact_path=sys.argv[2])  # warm-up
    samples = []
    for _ in range(int(sys.argv[3])):
        start = time.perf_counter()
        run = fn.run(params={"x": 2}, local=True, artifact_path=sys.argv[2])
        assert run.state() == "completed" and run.outputs["return"] == 2
        samples.append(time.perf_counter() - start)
    print(json.dumps(samples))
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--queued", type=int, default=500)
    parser.add_argument("--mlrun-python", type=Path, default=DEFAULT_MLRUN)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="runplane-bench-"))
    os.environ["RUNPLANE_LOCAL__HOME"] = str(work / "home")
    os.environ["RUNPLANE_CONFIG"] = os.devnull
    code = work / "noop.py"
    code.write_text(NOOP)

    import runplane
    from runplane.config import load_settings
    from runplane.service.embedded import EmbeddedService

    header("embedded default: run overhead and throughput")
    service = EmbeddedService(load_settings())
    fn = runplane.code_to_function("noop", filename=str(code), handler="handler")
    fn.with_requests(cpu="100m", mem="32Mi")
    service.wait(service.submit(fn, params={"x": 2}).uid)  # warm-up: imports, database, ledger
    samples = []
    for _ in range(args.runs):
        start = time.perf_counter()
        record = service.wait(service.submit(fn, params={"x": 2}).uid)
        samples.append(time.perf_counter() - start)
        assert record.state == "completed", record
        assert record.results == {"return": 2}, record
    print(f"no-op run, call to recorded result: {summary(samples)}")
    goal = statistics.median(samples) <= 0.100
    print(f"goal median <= 100 ms: {'met' if goal else 'MISSED'}")

    start = time.perf_counter()
    uids = [service.submit(fn, params={"x": i}).uid for i in range(args.queued)]
    submitted = time.perf_counter() - start
    records = [service.wait(uid) for uid in uids]
    elapsed = time.perf_counter() - start
    assert all(r.state == "completed" for r in records)
    peak = max(
        len(
            [
                r
                for r in records
                if r.started_at
                and r.started_at <= t.started_at
                and (r.ended_at or 0) > t.started_at
            ]
        )
        for t in records
        if t.started_at
    )
    print(
        f"{args.queued} queued tiny runs: submitted in {submitted:.2f} s, all recorded in "
        f"{elapsed:.2f} s -> {args.queued / elapsed:.1f} runs/s (cpu 100m each, at most "
        f"{peak} at once on {os.cpu_count()} cores)"
    )
    service.close()

    if args.mlrun_python.exists():
        done = subprocess.run(
            [
                str(args.mlrun_python),
                "-c",
                MLRUN_PROBE,
                str(code),
                str(work / "mlrun-artifacts"),
                str(args.runs),
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=work,
        )
        theirs = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"mlrun 1.12 local run (handler in the caller's process): {summary(theirs)}")
        ratio = statistics.median(samples) / statistics.median(theirs)
        print(
            f"ratio runplane/mlrun: {ratio:.1f}x (runplane starts a process per run, with "
            "limits enforced; mlrun's local run calls the handler in-process)"
        )
    else:
        print(f"mlrun: not measured ({args.mlrun_python} missing)")


if __name__ == "__main__":
    main()

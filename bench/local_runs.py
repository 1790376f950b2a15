"""End-to-end overhead of the embedded default, throughput of queued tiny runs, and what
supervising a running run costs.

Overhead: a no-op handler run through the whole path (call -> render -> record -> capacity
grant -> the run's process -> handler -> recorded result), median over ``--runs`` sequential
runs in one process, both as ``fn.run()`` (what a user calls) and through the service's own
calls, interleaved, next to MLRun's in-process local run of the same no-op (from the virtual
environment ``--mlrun-python``) and their ratio. Throughput: ``--queued`` no-op runs submitted
at once, until all are recorded; and the path users take, ``--sdk`` runs started with
``fn.run(watch=False)`` and then each handle waited for, as a script does; the two alternate for
``--rounds`` rounds, and their ratio is what holds on a busy machine. Supervision:
runplane's CPU (this process and the warm launcher's server) while ``--held`` sleeping runs
run, per run. The machine's load average is printed before and after: other work on the cores
shows in every number.

    python bench/local_runs.py [--runs 50] [--queued 500] [--sdk 500] [--rounds 3] [--held 20]
        [--launcher warm|fresh]
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
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).parent))

from common import header, summary

NOOP = "def handler(context, x: int = 1):\n    return x\n"
SLEEP = "import time\n\ndef handler(context, seconds: float = 1.0):\n    time.sleep(seconds)\n"
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
    parser.add_argument("--sdk", type=int, default=500)
    parser.add_argument("--held", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--launcher", choices=("warm", "fresh"), default="warm")
    parser.add_argument("--mlrun-python", type=Path, default=DEFAULT_MLRUN)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="runplane-bench-"))
    os.environ["RUNPLANE_LOCAL__HOME"] = str(work / "home")
    os.environ["RUNPLANE_LOCAL__LAUNCHER"] = args.launcher
    os.environ["RUNPLANE_CONFIG"] = os.devnull
    code = work / "noop.py"
    code.write_text(NOOP)
    sleeper = work / "sleeper.py"
    sleeper.write_text(SLEEP)

    import runplane
    from runplane.config import load_settings
    from runplane.service.embedded import embedded
    from runplane.spec.run_options import RunOptions

    header("embedded default: run overhead, throughput and supervision")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    service = embedded(load_settings())  # the one the SDK's fn.run() uses too
    print(f"isolation: {service.runtime.isolation}")
    fn = runplane.code_to_function("noop", filename=str(code), handler="handler")
    fn.with_requests(cpu="100m", mem="32Mi")
    once = RunOptions(params={"x": 2})
    service.wait(service.submit(fn, once).uid)  # warm-up: imports, database, ledger
    direct, samples = [], []  # the service's own calls, and the user's fn.run(), interleaved
    for _ in range(args.runs):
        start = time.perf_counter()
        record = service.wait(service.submit(fn, once).uid)
        direct.append(time.perf_counter() - start)
        assert record.state == "completed", record
        assert record.results == {"return": 2}, record
        start = time.perf_counter()
        handle = fn.run(params={"x": 2})  # watch=True: waits, printing the run's output
        samples.append(time.perf_counter() - start)
        ended = handle.record
        assert ended.state == "completed", ended
        assert ended.results == {"return": 2}, ended
    print(f"no-op run, service.submit then wait: {summary(direct)}")
    print(f"no-op run, fn.run() (the user's call, to its recorded result): {summary(samples)}")

    # The two ways of queueing alternate, round by round, so that other work on the machine
    # weighs on both alike; their ratio is the number to read on a busy machine.
    def queued(count: int) -> list[Any]:
        uids = [service.submit(fn, RunOptions(params={"x": i})).uid for i in range(count)]
        return [service.wait(uid) for uid in uids]

    def sdk(count: int) -> list[Any]:
        handles = [fn.run(params={"x": i}, watch=False) for i in range(count)]
        return [handle.wait() for handle in handles]

    ways = {"queued": (queued, args.queued), "sdk": (sdk, args.sdk)}
    rates: dict[str, list[float]] = {"queued": [], "sdk": []}
    for round_ in range(1, args.rounds + 1):
        for way, (burst, count) in ways.items():
            if not count:  # 0: that way is not measured
                continue
            start, cpu = time.perf_counter(), time.process_time()
            ended = burst(count)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert all(record.state == "completed" for record in ended)
            rates[way].append(count / elapsed)
            what = (
                "queued no-op runs (service.submit)"
                if way == "queued"
                else "fn.run(watch=False), then each handle waited (the user's path)"
            )
            print(
                f"round {round_}: {count} {what}: all recorded in {elapsed:.2f} s -> "
                f"{count / elapsed:.1f} runs/s; runplane's process used "
                f"{cpu / count * 1000:.1f} ms of CPU per run"
            )
    if rates["queued"]:
        rate = statistics.median(rates["queued"])
        verdict = "met" if rate >= 200 else f"MISSED ({rate / 200:.2f}x)"
        print(f"queued runs/s, median of {len(rates['queued'])} rounds: {rate:.1f}")
        print(f"goal >= 200 queued runs/s (cpu 100m each, {os.cpu_count()} cores): {verdict}")
    if rates["queued"] and rates["sdk"]:
        pairs = zip(rates["sdk"], rates["queued"], strict=True)
        ratio = statistics.median(sdk_rate / rate_ for sdk_rate, rate_ in pairs)
        print(
            f"the user's path / queued, median of the rounds' ratios: {ratio:.2f} "
            f"(goal >= 0.95: {'met' if ratio >= 0.95 else 'MISSED'})"
        )

    held = runplane.code_to_function("sleeper", filename=str(sleeper), handler="handler")
    held.with_requests(cpu="10m", mem="32Mi")
    uids = [service.submit(held, RunOptions(params={"seconds": 8.0})).uid for _ in range(args.held)]
    deadline = time.monotonic() + 60
    while any(service.get(uid).state != "running" for uid in uids):
        assert time.monotonic() < deadline, "the held runs did not all start"
        time.sleep(0.2)
    launcher = service.runtime.launcher
    server = psutil.Process(launcher.server_pid) if launcher and launcher.server_pid else None
    time.sleep(0.5)  # past the starts
    window = 4.0
    ours, theirs = time.process_time(), server.cpu_times() if server else None
    time.sleep(window)
    spent = time.process_time() - ours
    if server is not None and theirs is not None:
        now = server.cpu_times()
        spent += now.user + now.system - theirs.user - theirs.system
    assert all(service.get(uid).state == "running" for uid in uids), "a held run ended early"
    per_run = spent / window / args.held * 100
    print(
        f"supervision: {per_run:.3f}% of a core per running run ({args.held} runs held for "
        f"{window:g} s: runplane's process, and its fork server when warm, used "
        f"{spent * 1000:.0f} ms of CPU)"
    )
    print(f"goal <= 1% of a core per run: {'met' if per_run <= 1 else 'MISSED'}")
    for uid in uids:
        service.wait(uid)
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
        theirs_samples = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"mlrun local run (handler in the caller's process): {summary(theirs_samples)}")
        ratio = statistics.median(samples) / statistics.median(theirs_samples)
        print(
            f"ratio runplane fn.run()/mlrun: {ratio:.2f}x (runplane forks an isolated process per "
            "run, in its own cgroup; mlrun's local run calls the handler in-process)"
        )
        print(f"goal <= 3x mlrun: {'met' if ratio <= 3 else f'MISSED ({ratio / 3:.2f}x the goal)'}")
    else:
        print(f"mlrun: not measured ({args.mlrun_python} missing)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

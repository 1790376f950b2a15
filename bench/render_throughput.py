"""Renders per second of a fully configured function on one core (goal: at least 5,000/s).

python bench/render_throughput.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import header


def fully_configured():  # type: ignore[no-untyped-def]
    import runplane

    fn = runplane.new_function("training", project="bench", labels={"team": "ml"})
    fn.with_requests(mem="1G", cpu=1).with_limits(mem="2G", cpu=2, gpus=1)
    fn.with_node_selection(
        node_selector={"app.iguazio.com/lifecycle": "non-preemptible", "zone": "a"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "gen", "operator": "In", "values": ["4", "5"]}
                            ]
                        }
                    ]
                }
            }
        },
    )
    fn.with_preemption_mode("prevent").with_priority_class("high")
    fn.set_envs(env_vars={f"VAR_{i}": str(i) for i in range(10)})
    fn.set_env_from_secret("TOKEN", "creds", "token")
    fn.apply(runplane.mount_pvc("data-claim", "data", "/data"))
    fn.apply(runplane.mount_configmap("cfg", "/etc/cfg"))
    fn.set_state_thresholds({"pending_not_scheduled": "1 min", "running": "2h"})
    return fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the goal says
    from runplane.config import load_settings
    from runplane.rendering import RunRef, render

    header("render throughput (one core)")
    settings = load_settings()
    fn = fully_configured()
    run = RunRef(uid="0" * 32)
    for _ in range(200):  # warm up
        render(fn, settings, run=run)
    count = 0
    start = time.perf_counter()
    deadline = start + args.seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            render(fn, settings, run=run)
        count += 100
    elapsed = time.perf_counter() - start
    rate = count / elapsed
    print(
        f"renders: {count} in {elapsed:.2f} s -> {rate:,.0f} renders/s, "
        f"{elapsed / count * 1e6:.0f} us each"
    )
    print(f"goal >= 5,000/s: {'met' if rate >= 5000 else 'MISSED'}")


if __name__ == "__main__":
    main()

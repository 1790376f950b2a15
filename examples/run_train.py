"""The example job through the SDK: explicit resources, a state threshold, results and usage."""

from pathlib import Path

import runplane

fn = runplane.code_to_function(
    "training", filename=str(Path(__file__).with_name("train.py")), kind="job", handler="train"
)
fn.with_requests(mem="256Mi", cpu=1)
fn.with_limits(mem="512Mi", cpu=1)
fn.set_state_thresholds({"running": "5 minutes"})

run = fn.run(params={"epochs": 3})
record = run.wait()
print(f"state: {record.state}, results: {record.results}")
print(f"peak memory: {record.peak_memory_bytes / 2**20:.0f}Mi, cpu: {record.cpu_seconds:.2f}s")

"""A finished local run's usage: its cgroup's charge, with its process's own figures as the
floor where the charge is known to be short."""

from __future__ import annotations

from runplane.runs import Usage
from runplane.runtimes.local.cgroups import Counters
from runplane.runtimes.local.process import Exit
from runplane.runtimes.local.supervise import _final

MiB = 2**20


def test_a_measured_charge_is_the_peak_and_cpu_is_never_below_the_process_own() -> None:
    counters = Counters(peak_memory=52 * MiB, cpu_seconds=0.002)
    exit = Exit(0, cpu_seconds=0.004, peak_memory=57 * MiB)
    assert _final(counters, exit, unmeasured=False) == Usage(52 * MiB, 0.004)


def test_a_warm_run_whose_footprint_is_unknown_is_at_least_its_resident_peak() -> None:
    counters = Counters(peak_memory=int(1.8 * MiB), cpu_seconds=0.003)
    exit = Exit(0, cpu_seconds=0.003, peak_memory=24 * MiB)
    assert _final(counters, exit, unmeasured=True) == Usage(24 * MiB, 0.003)

"""One function, one memory limit, one outcome: the same functions run on the embedded default
(a cgroup per run, forked warm) and as pods on the testbed's real kubelet node end the same way
(completed or OOMKilled), and the peaks of those that complete agree within 4 MiB.

The table it prints is the one in docs/benchmarks.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import runplane
from runplane.config import load_settings
from runplane.service.embedded import EmbeddedService
from runplane.spec.run_options import RunOptions
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.integration.test_real_node_runs import Service, real_node_service

MiB = 2**20
LIMIT = "64Mi"
#: How far the two peaks of one completed function may be apart.
TOLERANCE = 4 * MiB

#: The handler holds ``mib`` MiB (written, so every page is resident), ``forked`` of them in a
#: child process, and reports the peak its pod's cgroup counted (in a pod only: locally the
#: record's peak is the one compared, and ``/sys/fs/cgroup`` is the machine's).
CODE = """
import os


def _cgroup_peak():
    for path in ("/sys/fs/cgroup/memory/memory.max_usage_in_bytes", "/sys/fs/cgroup/memory.peak"):
        try:
            with open(path) as file:
                return int(file.read())
        except OSError:
            continue
    return 0


def handler(context, mib: int = 0, forked: int = 0):
    held = bytearray((mib - forked) * 2**20)
    if forked:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            also = bytearray(forked * 2**20)
            os.write(write, b"x")
            os._exit(0 if len(also) == forked * 2**20 else 1)
        os.close(write)
        os.read(read, 1)
        _, status = os.waitpid(pid, 0)
        if status:
            raise RuntimeError(f"the child process ended with status {status}")
    context.log_result("cgroup_peak", _cgroup_peak())
    return len(held)
"""

#: (name, MiB held, MiB of it held by a forked child).
CASES = [
    ("no-op", 0, 0),
    ("20Mi", 20, 0),
    ("30Mi", 30, 0),
    ("40Mi", 40, 0),
    ("46Mi", 46, 0),
    ("50Mi", 50, 0),
    ("54Mi", 54, 0),
    ("60Mi", 60, 0),
    ("80Mi", 80, 0),
    ("forked 20+20Mi", 40, 20),
    ("forked 30+30Mi", 60, 30),
]


@pytest.fixture(scope="module")
def pods(
    testbed_cluster: TestbedCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """``runplane serve`` whose functions run as pods on the real node."""
    home = tmp_path_factory.mktemp("parity-service")
    with real_node_service(testbed_cluster, real_node, home, "parity") as running:
        yield running


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedService]:
    """The embedded default as a user's machine has it: a cgroup per run, warm launcher."""
    home = tmp_path_factory.mktemp("parity-home")
    with pytest.MonkeyPatch.context() as env:
        for name in [name for name in os.environ if name.startswith("RUNPLANE_")]:
            env.delenv(name)
        env.setenv("RUNPLANE_CONFIG", os.devnull)
        env.setenv("RUNPLANE_LOCAL__HOME", str(home))
        env.setenv("RUNPLANE_LOCAL__ISOLATION", "cgroup")
        env.setenv("RUNPLANE_LOCAL__LAUNCHER", "warm")
        service = EmbeddedService(load_settings()).start()
        try:
            yield service
        finally:
            service.close()


def table(rows: list[tuple[str, tuple[str, str], int, tuple[str, str], int]]) -> str:
    """The rows as docs/benchmarks.md shows them."""
    lines = [
        f"\none function under a {LIMIT} limit: the embedded default (a cgroup per run, "
        "forked warm) and a pod on the real node",
        "| function | embedded default | its peak | pod | its peak (container cgroup) | gap |",
        "|---|---|---|---|---|---|",
    ]
    for name, here, here_peak, pod, pod_peak in rows:
        both = here[0] == "completed" and pod_peak
        gap = f"{(here_peak - pod_peak) / MiB:+.1f} MiB" if both else "-"
        pod_text = f"{pod_peak / MiB:.1f} MiB" if pod_peak else "-"
        lines.append(
            f"| {name} | {here[0]} ({here[1]}) | {here_peak / MiB:.1f} MiB | {pod[0]} ({pod[1]}) "
            f"| {pod_text} | {gap} |"
        )
    return "\n".join(lines) + "\n"


def test_one_function_one_limit_ends_the_same_here_and_in_a_pod(
    pods: Service, embedded: EmbeddedService, tmp_path: Path
) -> None:
    source = tmp_path / "hold.py"
    source.write_text(CODE)
    fn = runplane.code_to_function("hold", filename=str(source), handler="handler")
    fn.with_requests(cpu="100m", mem=LIMIT).with_limits(mem=LIMIT)
    # One pod of this function first, left out of the comparison: once (a CI run, the pods
    # submitted right after the node's image test) the first pod of the table peaked at
    # 13.1 MiB where the same pod peaks at 7.7-8.8 MiB, every later pod as usual. Not reproduced
    # since, neither after that test nor with the page cache dropped; whatever a node does
    # first for a pod of an image, the compared pods come after it, as on a node in use.
    first = pods.submit(fn, params={"mib": "0", "forked": "0"})
    assert pods.wait(first, {"completed", "error"}, timeout=180)["state"] == "completed"
    in_pods = {
        name: pods.submit(fn, params={"mib": str(mib), "forked": str(forked)})
        for name, mib, forked in CASES
    }
    rows = []
    for name, mib, forked in CASES:
        params = {"mib": str(mib), "forked": str(forked)}
        here = embedded.wait(embedded.submit(fn, RunOptions(params=params)).uid, 60)
        pod = pods.wait(in_pods[name], {"completed", "error"}, timeout=180)
        pod_peak = (pod.get("results") or {}).get("cgroup_peak", 0)
        rows.append(
            (
                name,
                (here.state, here.reason),
                here.peak_memory_bytes,
                (pod["state"], pod["reason"]),
                pod_peak,
            )
        )
    sys.stdout.write(table(rows))
    for name, here, here_peak, pod, pod_peak in rows:
        assert (str(here[0]), str(here[1])) == pod, f"{name}: here {here}, in a pod {pod}"
        if here[0] == "completed":
            assert abs(here_peak - pod_peak) <= TOLERANCE, (
                f"{name}: peak here {here_peak / MiB:.1f} MiB, in a pod {pod_peak / MiB:.1f} MiB"
            )

"""A run on the real kubelet node is sampled while it runs: its memory and CPU over time come
from the node's kubelet summary through the API server's node proxy, and a pod that holds
40 MiB shows a curve reaching them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import runplane
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.integration.test_real_node_runs import Service, real_node_service

MiB = 2**20
CODE = """
import time


def hold(context, seconds: float = 8.0):
    held = bytearray(40 * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(seconds)
    return len(held)
"""


@pytest.fixture(scope="module")
def pods(
    testbed_cluster: TestbedCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    home = tmp_path_factory.mktemp("usage-service")
    with real_node_service(testbed_cluster, real_node, home, "usage") as running:
        yield running


def test_a_pod_on_the_real_node_is_sampled_while_it_runs(pods: Service, tmp_path: Path) -> None:
    source = tmp_path / "hold.py"
    source.write_text(CODE)
    fn = runplane.code_to_function("hold", filename=str(source), handler="hold")
    fn.with_requests(cpu="100m", mem="64Mi").with_limits(mem="128Mi")
    uid = pods.submit(fn)
    run = pods.wait(uid, {"completed", "error"}, timeout=240)
    assert run["state"] == "completed", run
    answer = pods.http.get(f"{pods.url}/runs/{uid}/usage/samples")
    assert answer.status_code == 200, answer.text
    samples = answer.json()["samples"]
    # The kubelet refreshes its figures every few seconds: an 8-second run gets a few.
    assert len(samples) >= 2, samples
    assert max(memory for _, memory, _ in samples) >= 40 * MiB, samples
    assert samples[-1][2] > 0, samples  # CPU time counted
    assert [at for at, _, _ in samples] == sorted(at for at, _, _ in samples)

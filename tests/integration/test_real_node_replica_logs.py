"""Runs' output at either replica, on the testbed's real node: two ``runplane serve`` processes
on one PostgreSQL database, each with a home of its own as the chart gives them, one leading.
The follower reads a run's pods' logs from the API server when asked, so it answers the lines a
running run printed so far and, once it ended, the very bytes the leader copied; after the
leader stops, the one that took over answers the same."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s

import runplane
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.integration.test_leader_replicas import (
    TOKEN,
    Replica,
    fresh_postgres_database,
    leading_pair,
    until,
)

pytestmark = pytest.mark.testbed

HEADERS = {"Authorization": f"Bearer {TOKEN}"}
CODE = """\
import sys, time


def handler(context, lines: int = 300):
    for i in range(lines):
        print(f"line {i:04d} " + "x" * 60, flush=True)
    print("to stderr too", file=sys.stderr, flush=True)
    time.sleep(4)
    print("after the pause", flush=True)
    return {"lines": lines}
"""


def output(replica: Replica, uid: str) -> bytes:
    """The run's whole output as the replica answers it, chunk after chunk."""
    text, offset = b"", 0
    while True:
        answer = httpx.get(
            f"{replica.url}/runs/{uid}/logs", params={"offset": offset}, headers=HEADERS, timeout=30
        )
        assert answer.status_code == 200, answer.text
        if not answer.content:
            return text
        text += answer.content
        offset = int(answer.headers["X-Runplane-Next-Offset"])


@pytest.fixture
def replicas(
    testbed_cluster: TestbedCluster, real_node: RealNode, tmp_path: Path
) -> Iterator[tuple[Replica, Replica]]:
    namespace = f"replica-logs-{uuid.uuid4().hex[:6]}"
    core = k8s.CoreV1Api(testbed_cluster.api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    common = testbed_cluster.service_env(tmp_path, TOKEN, namespace=namespace)
    common |= {
        "RUNPLANE_SERVICE__DATABASE_URL": fresh_postgres_database(),
        "RUNPLANE_SERVICE__LEADER_ELECTION__ENABLED": "true",
        "RUNPLANE_FUNCTION_DEFAULTS__IMAGE": real_node.image,
        "RUNPLANE_FUNCTION_DEFAULTS__NODE_SELECTOR": json.dumps(real_node.node_selector),
        "RUNPLANE_FUNCTION_DEFAULTS__TOLERATIONS": json.dumps([real_node.toleration]),
    }
    try:
        with leading_pair(common, tmp_path) as pair:
            yield pair
    finally:
        core.delete_namespace(namespace)


def test_a_follower_answers_a_runs_output_as_the_leader_and_after_a_takeover(replicas, tmp_path):
    leader, follower = replicas
    source = tmp_path / "printer.py"
    source.write_text(CODE)
    fn = runplane.code_to_function("printer", filename=str(source), handler="handler")
    uid = follower.submit(fn.with_requests(cpu="100m", mem="64Mi"))

    # While it runs: what it printed so far, read by the follower from the pod's log.
    until(
        "the follower answers the output printed so far",
        lambda: b"to stderr too" in output(follower, uid),
        120,
        every=0.5,
    )
    assert follower.run(uid)["state"] == "running"
    so_far = output(follower, uid)
    # stdout and stderr reach the pod log through two pipes: their relative order is the
    # kubelet's, the same for both replicas; each stream keeps its own.
    printed = [line for line in so_far.splitlines() if line.startswith(b"line ")]
    assert [line[5:9] for line in printed] == [f"{i:04d}".encode() for i in range(300)]
    assert b"after the pause" not in so_far

    until("completed", lambda: follower.run(uid)["state"] == "completed", 120, every=0.5)
    assert follower.run(uid)["results"]["lines"] == 300
    at_leader, at_follower = output(leader, uid), output(follower, uid)
    assert at_follower == at_leader
    assert at_follower.count(b"\n") == 302
    assert at_follower.endswith(b"after the pause\n")
    assert b"runplane-results" not in at_follower

    # The leader stops (a rollout): the follower takes the lead and still answers the same.
    leader.stop()
    until("the follower leads", lambda: follower.role() == "leader", 30, every=0.1)
    assert output(follower, uid) == at_leader

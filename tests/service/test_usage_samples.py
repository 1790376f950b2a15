"""A run's memory and CPU over time: sampled from its cgroup while it runs, served to its
owner alone, and deleted with the run; on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from runplane.service.server import Server
from tests.service.conftest import OTHER_USER, USER, wait_state

HOLD = """\
import time


def handler(context):
    held = bytearray(40 * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(3)
    return {"held": len(held)}
"""


def test_a_run_holding_40_mib_for_3_seconds_has_a_curve_reaching_them(
    client: TestClient, server: Server, function_dict: Callable[..., dict[str, Any]]
) -> None:
    fn = function_dict(HOLD, name="hold")
    uid = client.post("/api/v1/runs", json={"function": fn}, headers=USER).json()["uid"]
    run = wait_state(client, uid, {"completed", "error"}, timeout=90)
    assert run["state"] == "completed", run
    answer = client.get(f"/api/v1/runs/{uid}/usage/samples", headers=USER)
    assert answer.status_code == 200
    samples = answer.json()["samples"]
    assert len(samples) >= 3, samples  # every 0.5 s for 3 s, however busy the machine
    assert max(memory for _, memory, _ in samples) >= 40 * 2**20, samples
    assert [at for at, _, _ in samples] == sorted(at for at, _, _ in samples)
    # Another user is refused as for the run's other paths.
    refused = client.get(f"/api/v1/runs/{uid}/usage/samples", headers=OTHER_USER)
    assert refused.status_code == 403
    assert client.get(f"/api/v1/runs/{uid}/usage", headers=OTHER_USER).status_code == 403
    # Stored, not only held: what a replica reads (written at the sampler's next look after
    # the end); and gone with its run.
    deadline = time.monotonic() + 30
    while len(server.runs.usage_store.read(uid)) < len(samples):
        assert time.monotonic() < deadline, "the ended run's samples were not written"
        time.sleep(0.1)
    assert server.runs.store.delete_runs([uid]) == 1
    assert server.runs.usage_store.read(uid) == []

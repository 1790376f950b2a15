"""dask on this machine: a real LocalCluster whose workers keep the function's limits."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import distributed
import pytest

import runplane
from runplane.errors import InvalidValueError
from runplane.spec import Function


@pytest.fixture
def cluster_function() -> Iterator[Function]:
    fn = runplane.new_function("cluster", kind="dask")
    fn.spec.min_replicas, fn.spec.max_replicas = 2, 3
    fn.with_worker_requests(mem="100Mi", cpu="500m").with_worker_limits(mem="300Mi", cpu=1)
    yield fn
    fn.close()


def test_a_computation_maps_over_the_workers_within_their_memory_limit(
    cluster_function: Function, capsys: pytest.CaptureFixture[str]
):
    client = cluster_function.client
    assert isinstance(client, distributed.Client)
    assert cluster_function.client is client  # one cluster per function
    assert "dask cluster cluster: dashboard http://127.0.0.1:" in capsys.readouterr().out
    workers = client.scheduler_info()["workers"]
    assert len(workers) == 2  # min_replicas to start
    assert {info["memory_limit"] for info in workers.values()} == {300 * 2**20}
    assert {info["nthreads"] for info in workers.values()} == {1}  # one per CPU-limit core

    def square(x: int) -> tuple[int, int]:
        time.sleep(0.2)
        return x * x, os.getpid()

    results = client.gather(client.map(square, range(20)))
    assert [value for value, _ in results] == [x * x for x in range(20)]
    assert len({pid for _, pid in results}) >= 2  # spread over the workers

    def hog(size: int) -> int:
        block = bytearray(size)
        for index in range(0, size, 4096):
            block[index] = 1
        time.sleep(5)
        return len(block)

    with pytest.raises(distributed.KilledWorker):
        client.submit(hog, 600 * 2**20, pure=False).result(timeout=120)
    # dask's nanny restarted the workers that passed the limit; the scheduler recorded it.
    actions = [event["action"] for _, event in client.get_events("all")]
    assert "remove-worker" in actions
    assert actions.count("add-worker") >= 3
    deadline = time.monotonic() + 30
    while len(client.scheduler_info()["workers"]) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert client.submit(lambda: 42).result(timeout=30) == 42


def test_dask_functions_are_clusters_not_runs(cluster_function: Function):
    with pytest.raises(InvalidValueError, match="use fn.client"):
        cluster_function.run()
    job = runplane.new_function("job")
    with pytest.raises(InvalidValueError, match="fn.client belongs to dask functions"):
        _ = job.client

"""Leader election on a real API server's Lease: who holds it, when another may take it, a
release, a race for it, and a leader that cannot renew stepping down. Time is each
candidate's own clock, set by the test, so no test waits a lease's duration."""

from __future__ import annotations

import threading
import uuid
from typing import Any, Unpack

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runplane.runtimes.kubernetes.api.lease import LeaseElector, Timing
from runplane.runtimes.kubernetes.api.rest import Options, Query, RestApi
from testbed.pytest_plugin import TestbedCluster

TIMING = Timing(lease_duration=8, renew_deadline=5.0, retry_period=0.01)


class Clock:
    """A candidate's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Flaky:
    """The API as a candidate reaches it: through, or failing every request (a partition),
    or answering a GET with the Lease as it was read before (a write racing another's)."""

    def __init__(self, rest: RestApi) -> None:
        self.rest = rest
        self.down = False
        self.stale: dict[str, Any] | None = None

    def json(
        self, method: str, path: str, query: Query = None, **options: Unpack[Options]
    ) -> dict[str, Any]:
        if self.down:
            raise ApiException(status=503, reason="unreachable")
        if method == "GET" and self.stale is not None:
            return self.stale
        return self.rest.json(method, path, query, **options)

    def stream(self, *_: Any, **__: Any) -> Any:
        raise NotImplementedError


@pytest.fixture
def lease_name() -> str:
    return f"lease-{uuid.uuid4().hex[:8]}"


def candidate(
    tb: TestbedCluster, name: str, who: str, clock: Clock | None = None
) -> tuple[LeaseElector, Flaky, Clock]:
    clock = clock or Clock()
    api = Flaky(RestApi(tb.api))
    return LeaseElector(api, tb.namespace, name, who, TIMING, clock=clock), api, clock


def lease(tb: TestbedCluster, name: str) -> client.V1LeaseSpec:
    return client.CoordinationV1Api(tb.api).read_namespaced_lease(name, tb.namespace).spec


def test_the_first_candidate_creates_and_holds_the_lease(testbed_cluster, lease_name):
    first, _, _ = candidate(testbed_cluster, lease_name, "replica-a")
    second, _, _ = candidate(testbed_cluster, lease_name, "replica-b")
    assert first.try_acquire_or_renew()
    created = lease(testbed_cluster, lease_name)
    assert created.holder_identity == "replica-a"
    assert created.lease_duration_seconds == 8
    assert created.lease_transitions == 0
    assert not second.try_acquire_or_renew()
    assert second.holder == "replica-a"
    assert first.try_acquire_or_renew()  # a renewal: the acquire time stays
    renewed = lease(testbed_cluster, lease_name)
    assert renewed.holder_identity == "replica-a"
    assert renewed.acquire_time == created.acquire_time
    assert renewed.renew_time >= created.renew_time


def test_a_lease_not_renewed_is_taken_after_its_duration_on_the_takers_clock(
    testbed_cluster, lease_name
):
    holder, _, _ = candidate(testbed_cluster, lease_name, "replica-a")
    taker, _, clock = candidate(testbed_cluster, lease_name, "replica-b")
    assert holder.try_acquire_or_renew()
    assert not taker.try_acquire_or_renew()  # seen now: its duration counts from here
    clock.now += 7.9
    assert not taker.try_acquire_or_renew()
    assert holder.try_acquire_or_renew()  # a renewal seen restarts the count
    clock.now += 0.2
    assert not taker.try_acquire_or_renew()
    clock.now += 7.9
    assert not taker.try_acquire_or_renew()
    clock.now += 0.2  # 8.1 s since the renewal was seen: the holder is taken as dead
    assert taker.try_acquire_or_renew()
    taken = lease(testbed_cluster, lease_name)
    assert taken.holder_identity == "replica-b"
    assert taken.lease_transitions == 1
    assert not holder.try_acquire_or_renew()  # the old holder finds it another's


def test_a_released_lease_is_taken_at_the_next_read(testbed_cluster, lease_name):
    holder, _, _ = candidate(testbed_cluster, lease_name, "replica-a")
    taker, _, _ = candidate(testbed_cluster, lease_name, "replica-b")
    assert holder.try_acquire_or_renew()
    assert not taker.try_acquire_or_renew()
    assert holder.release()
    assert lease(testbed_cluster, lease_name).holder_identity in (None, "")
    assert taker.try_acquire_or_renew()  # no duration to wait: nobody holds it
    assert lease(testbed_cluster, lease_name).holder_identity == "replica-b"
    assert not holder.release()  # not its own any more: left as it is
    assert lease(testbed_cluster, lease_name).holder_identity == "replica-b"


def test_of_two_candidates_racing_for_an_expired_lease_one_wins(testbed_cluster, lease_name):
    dead, _, _ = candidate(testbed_cluster, lease_name, "replica-dead")
    assert dead.try_acquire_or_renew()
    a, _, clock_a = candidate(testbed_cluster, lease_name, "replica-a")
    b, api_b, clock_b = candidate(testbed_cluster, lease_name, "replica-b")
    assert not a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    path = f"/apis/coordination.k8s.io/v1/namespaces/{testbed_cluster.namespace}/leases"
    api_b.stale = RestApi(testbed_cluster.api).json("GET", f"{path}/{lease_name}")
    clock_a.now += 9
    clock_b.now += 9
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # its write carries the version read: 409
    assert lease(testbed_cluster, lease_name).holder_identity == "replica-a"


def test_a_leader_that_cannot_renew_steps_down_at_the_deadline(testbed_cluster, lease_name):
    leader, api, clock = candidate(testbed_cluster, lease_name, "replica-a")
    assert leader.try_acquire_or_renew()
    api.down = True
    tries: list[float] = []

    class Ticking(threading.Event):
        """Each wait of the renew loop moves the leader's clock one second on."""

        def wait(self, timeout: float | None = None) -> bool:
            tries.append(clock.now)
            clock.now += 1.0
            return False

    assert leader.renew(Ticking()) is False
    # Renewals failed from the first; it stepped down on the first failure past 5 s.
    assert clock.now - tries[0] == pytest.approx(6.0)
    assert leader.expired()


def test_a_leader_that_finds_another_holder_steps_down_at_once(testbed_cluster, lease_name):
    leader, _, _ = candidate(testbed_cluster, lease_name, "replica-a")
    assert leader.try_acquire_or_renew()
    spec = {"holderIdentity": "replica-b", "leaseDurationSeconds": 8}
    client.CoordinationV1Api(testbed_cluster.api).patch_namespaced_lease(
        lease_name, testbed_cluster.namespace, {"spec": spec}
    )
    assert leader.renew(threading.Event()) is False
    assert not leader.expired()  # not the deadline: another holds it
    assert leader.holder == "replica-b"


def test_a_stopped_leader_returns_from_renewing_holding_the_lease(testbed_cluster, lease_name):
    leader, _, _ = candidate(testbed_cluster, lease_name, "replica-a")
    assert leader.acquire(threading.Event())
    stop = threading.Event()
    stop.set()
    assert leader.renew(stop) is True
    assert lease(testbed_cluster, lease_name).holder_identity == "replica-a"
    assert leader.release()

"""Replicas sharing one database: a follower records what it is asked, the leader carries it
out, and a leader that steps down stops at once. The runtime is a stand-in for a cluster that
records what it is asked; the leader's Lease is tested on a real API server
(tests/integration/test_leader_lease.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runplane
from runplane.config import Settings, load_settings
from runplane.errors import ConfigError
from runplane.runs import Reason, RunState
from runplane.runtimes.contract import Capabilities, RunRequest
from runplane.runtimes.events import EventChannel, RunEvent
from runplane.service.core import RunService
from runplane.service.db import connect
from runplane.service.records import RunStore


class Cluster:
    """What the service asks of a cluster, recorded; each launch reports the run pending."""

    name = "kubernetes"
    capabilities = Capabilities(
        gpus=False, preemption=False, node_labels=False, deploy=False, durable=True
    )
    isolation = "a stand-in"

    def __init__(self) -> None:
        self.launched: list[str] = []
        self.aborted: list[str] = []
        self.asked = threading.Condition()
        self._events = EventChannel()
        #: What keeps the watch of pods from reporting, as the runtime says it (``None``: none).
        self.trouble: str | None = None

    def check(self, request: RunRequest) -> None:
        pass

    def launch(self, request: RunRequest) -> None:
        with self.asked:
            self.launched.append(request.uid)
            self.asked.notify_all()
        self._events.publish(RunEvent(request.uid, RunState.PENDING, attempt=request.attempt))

    def abort(self, uid: str, reason: str, message: str) -> bool:
        if uid not in self.launched:
            return False  # nothing of it on the cluster
        with self.asked:
            self.aborted.append(uid)
            self.asked.notify_all()
        self._events.publish(RunEvent(uid, RunState.ABORTED, reason=reason, message=message))
        return True

    def aborting(self, uid: str, reason: str, message: str) -> None:
        pass  # its abort reports at once

    def events(self) -> EventChannel:
        return self._events

    def existing(self) -> dict[str, list[str]]:
        return {}

    def apply_quotas(self, quotas: Any) -> None:
        pass  # a stand-in admits every run

    def usage(self, uid: str) -> None:
        return None  # a stand-in measures nothing, as a cluster without a kubelet API

    def usages(self, uids: Any) -> dict[str, Any]:
        return {}

    def watching(self) -> str | None:
        return self.trouble

    def close(self, grace: float = 0.0) -> None:
        self._events.close()

    def wait(self, what: str, check: Any) -> None:
        with self.asked:
            assert self.asked.wait_for(check, timeout=30), what


@pytest.fixture
def settings(database: str) -> Settings:
    service = {
        "runtime": "kubernetes",
        "database_url": database,
        "leader_election": {"enabled": True, "pickup_interval": 0.05},
    }
    return Settings(service=service)


@pytest.fixture
def services(settings: Settings) -> Iterator[tuple[RunService, RunService, Cluster, Cluster]]:
    url = settings.service.database_url
    assert url is not None
    engine = connect(url)
    follower_cluster, leader_cluster = Cluster(), Cluster()
    follower = RunService(settings, RunStore(engine), follower_cluster, service=True).follow()  # type: ignore[arg-type]
    leader = RunService(settings, RunStore(engine), leader_cluster, service=True)  # type: ignore[arg-type]
    yield follower, leader, follower_cluster, leader_cluster
    follower.close()
    leader.close()
    engine.dispose()


@pytest.fixture
def fn(tmp_path: Path) -> runplane.Function:
    code = tmp_path / "job.py"
    code.write_text("def handler(context):\n    return 1\n")
    return runplane.code_to_function("job", filename=str(code), handler="handler", image="x:1")


def test_a_follower_records_runs_and_aborts_for_the_leader(services, fn):
    follower, _, cluster, _ = services
    record = follower.submit(fn)
    assert record.state is RunState.CREATED
    assert record.reason == Reason.AWAITING_LEADER
    assert "leading replica launches it" in record.status_text
    assert follower.store.awaiting_leader("kubernetes") == [record.uid]
    follower.abort(record.uid)
    assert follower.store.awaiting_leader("kubernetes") == []  # not launched once aborted
    assert follower.store.cluster_abort_requests("kubernetes") == [record.uid]
    assert cluster.launched == []
    assert cluster.aborted == []


def test_the_leader_launches_and_aborts_what_a_follower_recorded(services, fn):
    follower, leader, follower_cluster, cluster = services
    early = follower.submit(fn)  # before anyone leads: the leader's start launches it
    leader.start()
    cluster.wait("launched at the start", lambda: early.uid in cluster.launched)
    later = follower.submit(fn)  # picked up while leading
    cluster.wait("picked up", lambda: later.uid in cluster.launched)
    follower.abort(later.uid)
    cluster.wait("aborted", lambda: later.uid in cluster.aborted)
    ended = follower.wait(later.uid, timeout=30)
    assert ended.state is RunState.ABORTED
    assert cluster.launched.count(later.uid) == 1
    assert cluster.aborted.count(later.uid) == 1
    assert follower_cluster.launched == follower_cluster.aborted == []


def test_a_run_aborted_before_the_leader_launched_it_ends_aborted(services, fn):
    follower, leader, _, cluster = services
    leader.start()
    record = follower.submit(fn)
    follower.abort(record.uid)  # the leader may or may not have launched it meanwhile
    ended = follower.wait(record.uid, timeout=30)
    assert ended.state is RunState.ABORTED
    assert cluster.launched.count(record.uid) <= 1


def test_a_followers_live_pages_learn_of_the_leaders_changes(services, fn):
    follower, leader, _, cluster = services
    leader.start()
    uid = follower.submit(fn).uid
    cluster.wait("picked up", lambda: uid in cluster.launched)

    async def changes_until_told() -> set[str | None]:
        seen: set[str | None] = set()
        async with follower.feed.subscribe() as changes:
            # Nothing asked here publishes here: the leader records the changes.
            await asyncio.to_thread(follower.abort, uid)
            while uid not in seen:
                seen |= await asyncio.wait_for(changes.changed(timeout=30), 30)
        return seen

    assert uid in asyncio.run(changes_until_told())  # the launch's or the abort's change
    assert follower.wait(uid, timeout=30).state is RunState.ABORTED


def test_readiness_asks_the_watch_of_the_leader_only(services, fn):
    """A follower watches nothing: it is ready while its database answers (the server checks
    that on its own). The leader is not ready while its watch of pods fails, as a replica
    alone is not."""
    follower, leader, follower_cluster, cluster = services
    follower_cluster.trouble = cluster.trouble = "the pod watch is refused: HTTP 403"
    assert follower.watching() is None
    assert leader.watching() == "the run service has not started"
    leader.start()
    assert leader.watching() == "the pod watch is refused: HTTP 403"
    cluster.trouble = None
    assert leader.watching() is None
    leader.step_down()
    cluster.trouble = "the pod watch is refused: HTTP 403"
    assert leader.watching() is None  # stepped down: it serves as a follower until it stops


def test_a_leader_that_steps_down_records_for_the_next(services, fn):
    _, leader, _, cluster = services
    leader.start()
    leader.step_down()
    assert leader.following
    record = leader.submit(fn)
    assert record.reason == Reason.AWAITING_LEADER
    leader.abort(record.uid)
    assert cluster.launched == []
    assert cluster.aborted == []


def test_replicas_need_a_cluster_and_a_shared_database():
    with pytest.raises(ConfigError, match="leader_election is for replicas"):
        load_settings(service={"leader_election": {"enabled": True}})
    with pytest.raises(ConfigError, match="lease_duration > renew_deadline"):
        load_settings(
            service={
                "runtime": "kubernetes",
                "database_url": "postgresql+psycopg://db/runplane",
                "leader_election": {"enabled": True, "lease_duration": 5, "renew_deadline": 6},
            }
        )

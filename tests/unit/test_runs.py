"""The run model's rules, and the event channel runtimes report through."""

from __future__ import annotations

import asyncio
import threading

import pytest

from runplane.errors import InvalidValueError
from runplane.runs import (
    LIVE,
    TERMINAL,
    AttemptRecord,
    Condition,
    RunRecord,
    RunState,
    TransitionRecord,
)
from runplane.runtimes.events import EventChannel, RunEvent


@pytest.mark.parametrize("end", sorted(TERMINAL))
def test_the_first_end_wins(end: RunState) -> None:
    assert not any(end.may_become(state) for state in RunState)


@pytest.mark.parametrize("state", sorted(LIVE))
def test_a_live_state_may_be_observed_again_and_may_end(state: RunState) -> None:
    assert state.may_become(state)
    assert all(state.may_become(end) for end in TERMINAL)
    assert not state.may_become(RunState.CREATED) or state is RunState.CREATED


def test_an_abort_under_way_only_ends() -> None:
    assert not RunState.ABORTING.may_become(RunState.RUNNING)
    assert not RunState.ABORTING.may_become(RunState.PENDING)
    assert RunState.ABORTING.may_become(RunState.ABORTED)
    assert RunState.ABORTING.may_become(RunState.COMPLETED)  # it finished before the kill


def test_a_run_moves_forward() -> None:
    assert RunState.CREATED.may_become(RunState.RUNNING)  # a watch may first see it running
    assert RunState.PENDING.may_become(RunState.RUNNING)
    assert not RunState.RUNNING.may_become(RunState.PENDING)


def test_names_users_write() -> None:
    assert Condition.named("state", "executing") is Condition.RUNNING
    assert Condition.named("state", "image_pull_backoff") is Condition.IMAGE_PULL_BACKOFF
    with pytest.raises(InvalidValueError, match="allowed states are pending_scheduled, "):
        Condition.named("state", "runing")
    assert RunState.named("state", "aborted") is RunState.ABORTED
    with pytest.raises(InvalidValueError, match="'finished' is not valid; run states are created"):
        RunState.named("state", "finished")


def test_records_round_trip_through_json() -> None:
    record = RunRecord(
        uid="a" * 32,
        project="p",
        name="f",
        runtime="local",
        state=RunState.COMPLETED,
        reason="Completed",
        status_text="",
        params={"x": 1},
        inputs={},
        thresholds={"running": "1h"},
        priority_class="medium",
        requests={"cpu": "1"},
        limits={},
        results={"y": 2},
        peak_memory_bytes=10,
        cpu_seconds=0.5,
        created_at=1.0,
        updated_at=2.0,
        state_since=2.0,
        started_at=1.5,
        ended_at=2.0,
        function={"kind": "job"},
        transitions=[TransitionRecord(RunState.CREATED, "", "", 1.0)],
        attempts=[AttemptRecord(1, "node", 42, 1.5, 2.0, 0, "Completed")],
    )
    data = record.to_json()
    assert data["state"] == "completed"
    assert data["transitions"][0]["state"] == "created"
    assert RunRecord.from_json(data) == record
    assert record.finished
    assert record.usage.cpu_seconds == 0.5


def read_all(channel: EventChannel) -> list[RunEvent]:
    async def collect() -> list[RunEvent]:
        return [event async for event in channel.read()]

    return asyncio.run(collect())


def test_events_published_before_and_while_reading_arrive_in_order() -> None:
    channel = EventChannel()
    channel.publish(RunEvent("early", RunState.PENDING))
    started = threading.Event()
    seen: list[RunEvent] = []

    async def collect() -> None:
        async for event in channel.read():
            seen.append(event)
            started.set()

    reader = threading.Thread(target=lambda: asyncio.run(collect()))
    reader.start()
    assert started.wait(5)
    publishers = [
        threading.Thread(
            target=lambda n=n: [
                channel.publish(RunEvent(f"{n}-{i}", RunState.RUNNING)) for i in range(100)
            ]
        )
        for n in range(4)
    ]
    for publisher in publishers:
        publisher.start()
    for publisher in publishers:
        publisher.join()
    channel.close()
    reader.join(5)
    assert not reader.is_alive(), "closing ends the reader"
    assert seen[0].uid == "early"
    assert len(seen) == 401
    for n in range(4):
        assert [e.uid for e in seen if e.uid.startswith(f"{n}-")] == [
            f"{n}-{i}" for i in range(100)
        ]


def test_a_closed_channel_keeps_nothing_new() -> None:
    channel = EventChannel()
    channel.publish(RunEvent("kept", RunState.PENDING))
    channel.close()
    channel.publish(RunEvent("dropped", RunState.PENDING))
    assert [e.uid for e in read_all(channel)] == ["kept"]


def test_one_reader_at_a_time_and_a_stopped_reader_loses_nothing() -> None:
    channel = EventChannel()
    waiting = threading.Event()

    async def first_reader() -> None:
        reading = channel.read()
        task = asyncio.ensure_future(anext(reading))
        await asyncio.sleep(0)  # the reader is now waiting for an event
        waiting.set()
        with pytest.raises(RuntimeError, match="one reader"):
            await anext(channel.read())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await reading.aclose()

    asyncio.run(first_reader())  # its loop is closed now
    assert waiting.is_set()
    channel.publish(RunEvent("after", RunState.PENDING))  # must not touch the closed loop
    channel.close()
    assert [e.uid for e in read_all(channel)] == ["after"]

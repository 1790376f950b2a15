"""How the service's recorder groups a runtime's events into bursts (one transaction each),
and how often the events wake it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import pytest

from runplane.runs import RunState
from runplane.runtimes.events import EventChannel, RunEvent
from runplane.service import recorder as core


def event(number: int, state: RunState = RunState.RUNNING) -> RunEvent:
    return RunEvent(f"run-{number}", state, reason=state.value)


Feed = Callable[[EventChannel], Awaitable[None]]


async def collect(feed: Feed, limit: int = 256) -> list[tuple[float, list[RunEvent]]]:
    """The bursts the recorder takes of what ``feed`` publishes (then the channel closes),
    each with when it was taken."""
    channel = EventChannel()

    async def publish() -> None:
        await feed(channel)
        channel.close()

    feeding = asyncio.create_task(publish())
    loop = asyncio.get_running_loop()
    bursts = [(loop.time(), burst) async for burst in core._bursts(channel, limit)]
    await feeding
    return bursts


def taken(feed: Feed, limit: int = 256) -> list[list[RunEvent]]:
    return [burst for _, burst in asyncio.run(collect(feed, limit))]


@pytest.fixture
def lingers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The recorder's waits for more events, as they are asked for."""
    asked: list[float] = []
    linger = core._linger

    async def recorded(events: EventChannel, seconds: float) -> None:
        asked.append(seconds)
        await linger(events, seconds)

    monkeypatch.setattr(core, "_linger", recorded)
    return asked


def test_a_lone_event_is_taken_at_once(lingers: list[float]) -> None:
    async def one(channel: EventChannel) -> None:
        channel.publish(event(1))

    assert [[e.uid for e in burst] for burst in taken(one)] == [["run-1"]]
    assert lingers == []


def test_events_pouring_in_are_taken_in_larger_bursts_in_order(lingers: list[float]) -> None:
    async def pouring(channel: EventChannel) -> None:
        for number in range(400):  # far faster than 100 a second
            channel.publish(event(number))
            await asyncio.sleep(0)  # one at a time, as a runtime's threads publish them

    bursts = taken(pouring)
    assert [e.uid for burst in bursts for e in burst] == [f"run-{n}" for n in range(400)]
    assert lingers, "the recorder never waited for more"
    # Past the first events (the rate is not known yet), each burst is many events.
    assert len(bursts) < 400 / 4, [len(burst) for burst in bursts]


def test_a_slow_stream_is_never_held_back(lingers: list[float]) -> None:
    async def trickle(channel: EventChannel) -> None:
        for number in range(core._RATE_WINDOW + 5):
            channel.publish(event(number))
            await asyncio.sleep(0.025)  # 40 a second: below the busy rate

    bursts = taken(trickle)
    assert sum(len(burst) for burst in bursts) == core._RATE_WINDOW + 5
    assert lingers == []


def test_a_burst_never_exceeds_the_limit(lingers: list[float]) -> None:
    async def pouring(channel: EventChannel) -> None:
        for number in range(300):
            channel.publish(event(number))
            await asyncio.sleep(0)

    bursts = taken(pouring, limit=16)
    assert max(len(burst) for burst in bursts) <= 16
    assert sum(len(burst) for burst in bursts) == 300


def test_a_runs_end_cuts_the_wait_short(
    lingers: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever waits for a run's end is not held back by the wait for more events."""
    monkeypatch.setattr(core, "_LINGER", 30.0)  # a wait that would be plain to see
    ended_at: list[float] = []

    async def pouring_then_an_end(channel: EventChannel) -> None:
        for number in range(core._RATE_WINDOW + 1):
            channel.publish(event(number))
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)  # all taken: the next event starts a burst
        channel.publish(event(500))
        await asyncio.sleep(0.01)  # the recorder waits for more now
        ended_at.append(asyncio.get_running_loop().time())
        channel.publish(event(999, RunState.COMPLETED))

    bursts = asyncio.run(collect(pouring_then_an_end))
    assert lingers == [30.0], lingers
    at, burst = bursts[-1]
    assert [e.uid for e in burst][-2:] == ["run-500", "run-999"], bursts
    assert at - ended_at[0] < 15, "the run's end waited for the whole wait"


def test_events_that_arrive_while_the_recorder_waits_for_more_do_not_wake_it() -> None:
    """While it lingers, a publisher's event is buffered without waking the recorder's loop
    (each wake costs its thread more than the event's share of a burst); a run's end does."""
    channel = EventChannel()
    wakes: list[float] = []
    before_the_end: list[int] = []
    done = threading.Event()

    async def lingering() -> None:
        loop = asyncio.get_running_loop()
        wake = loop.call_soon_threadsafe

        def counted(callback: object, *args: object) -> object:
            wakes.append(time.monotonic())
            return wake(callback, *args)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        with channel.reader():
            publisher.start()
            await core._linger(channel, 5.0)
            done.set()

    def publish() -> None:
        for number in range(50):
            channel.publish(event(number))
            time.sleep(0.001)
        before_the_end.append(len(wakes))
        channel.publish(event(99, RunState.COMPLETED))

    publisher = threading.Thread(target=publish)
    began = time.monotonic()
    asyncio.run(lingering())
    publisher.join(5)
    assert before_the_end == [0], "an event that ends no run woke the lingering recorder"
    assert done.is_set()
    assert time.monotonic() - began < 4, "the run's end did not end the wait"
    assert len(wakes) == 1
    assert [e.uid for e in channel.take(100)][-1] == "run-99"


def test_an_event_on_its_node_is_a_copy_with_the_nodes_group():
    """The runtime's quick copy (most pod events are copied so) is the copy
    ``dataclasses.replace`` makes, every other field the event's own."""
    from dataclasses import fields, replace

    from runplane.runs import Condition, Usage

    given = RunEvent(
        "run-1",
        RunState.ERROR,
        condition=Condition.RUNNING,
        reason="OOMKilled",
        message="the memory limit",
        attempt=3,
        node="node-7",
        process_id=41,
        exit_code=137,
        usage=Usage(peak_memory_bytes=1 << 20, cpu_seconds=1.5),
        results={"loss": 0.1},
        artifacts=[{"key": "model"}],
        isolation="cgroup v1",
        at=12.5,
    ).classified()
    placed = given.on_node("spot-a", True)
    assert placed == replace(given, node_group="spot-a", spot=True)
    assert (given.node_group, given.spot) == ("", None)
    kept = {f.name for f in fields(RunEvent)} - {"node_group", "spot"}
    assert all(getattr(placed, name) is getattr(given, name) for name in kept)

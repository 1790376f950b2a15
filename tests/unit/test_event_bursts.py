"""How the service's recorder groups a runtime's events into bursts (one transaction each)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from runplane.runs import RunState
from runplane.runtimes.events import RunEvent
from runplane.service import recorder as core


def event(number: int, state: RunState = RunState.RUNNING) -> RunEvent:
    return RunEvent(f"run-{number}", state, reason=state.value)


async def collect(events: AsyncIterator[RunEvent], limit: int = 256) -> list[list[RunEvent]]:
    return [burst async for burst in core._bursts(events, limit)]


@pytest.fixture
def lingers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The recorder's waits for more events, as they are asked for."""
    asked: list[float] = []
    linger = core._linger

    async def recorded(urgent: asyncio.Event, seconds: float) -> None:
        asked.append(seconds)
        await linger(urgent, seconds)

    monkeypatch.setattr(core, "_linger", recorded)
    return asked


def test_a_lone_event_is_taken_at_once(lingers: list[float]) -> None:
    async def one() -> AsyncIterator[RunEvent]:
        yield event(1)

    bursts = asyncio.run(collect(one()))
    assert [[e.uid for e in burst] for burst in bursts] == [["run-1"]]
    assert lingers == []


def test_events_pouring_in_are_taken_in_larger_bursts_in_order(lingers: list[float]) -> None:
    async def pouring() -> AsyncIterator[RunEvent]:
        for number in range(400):  # far faster than 100 a second
            yield event(number)
            await asyncio.sleep(0)  # one at a time, as a runtime's threads publish them

    bursts = asyncio.run(collect(pouring()))
    assert [e.uid for burst in bursts for e in burst] == [f"run-{n}" for n in range(400)]
    assert lingers, "the recorder never waited for more"
    # Past the first events (the rate is not known yet), each burst is many events.
    assert len(bursts) < 400 / 4, [len(burst) for burst in bursts]


def test_a_slow_stream_is_never_held_back(lingers: list[float]) -> None:
    async def trickle() -> AsyncIterator[RunEvent]:
        for number in range(core._RATE_WINDOW + 5):
            yield event(number)
            await asyncio.sleep(0.025)  # 40 a second: below the busy rate

    bursts = asyncio.run(collect(trickle()))
    assert sum(len(burst) for burst in bursts) == core._RATE_WINDOW + 5
    assert lingers == []


def test_a_burst_never_exceeds_the_limit(lingers: list[float]) -> None:
    async def pouring() -> AsyncIterator[RunEvent]:
        for number in range(300):
            yield event(number)
            await asyncio.sleep(0)

    bursts = asyncio.run(collect(pouring(), limit=16))
    assert max(len(burst) for burst in bursts) <= 16
    assert sum(len(burst) for burst in bursts) == 300


def test_a_runs_end_cuts_the_wait_short(
    lingers: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever waits for a run's end is not held back by the wait for more events."""
    monkeypatch.setattr(core, "_LINGER", 30.0)  # a wait that would be plain to see
    ended_at: list[float] = []

    async def pouring_then_an_end() -> AsyncIterator[RunEvent]:
        for number in range(core._RATE_WINDOW + 1):
            yield event(number)
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)  # all taken: the next event starts a burst
        yield event(500)
        await asyncio.sleep(0.01)  # the recorder waits for more now
        ended_at.append(asyncio.get_running_loop().time())
        yield event(999, RunState.COMPLETED)

    async def timed() -> list[tuple[float, list[str]]]:
        loop = asyncio.get_running_loop()
        bursts = core._bursts(pouring_then_an_end(), 256)
        return [(loop.time(), [e.uid for e in burst]) async for burst in bursts]

    bursts = asyncio.run(timed())
    assert lingers == [30.0], lingers
    taken, burst = bursts[-1]
    assert burst[-2:] == ["run-500", "run-999"], bursts
    assert taken - ended_at[0] < 15, "the run's end waited for the whole wait"

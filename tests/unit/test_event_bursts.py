"""How the service's recorder groups a runtime's events into bursts (one transaction each)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from runplane.runs import RunState
from runplane.runtimes.events import RunEvent
from runplane.service import recorder as core


def event(number: int) -> RunEvent:
    return RunEvent(f"run-{number}", RunState.RUNNING, reason="Started")


async def collect(events: AsyncIterator[RunEvent], limit: int = 256) -> list[list[RunEvent]]:
    return [burst async for burst in core._bursts(events, limit)]


@pytest.fixture
def lingers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The recorder's waits for more events, as they are asked for."""
    asked: list[float] = []
    sleep = asyncio.sleep

    async def recorded(delay: float, *args: Any) -> Any:
        if delay == core._LINGER:
            asked.append(delay)
        return await sleep(delay, *args)

    monkeypatch.setattr(core.asyncio, "sleep", recorded)
    return asked


def test_a_lone_event_is_taken_at_once(lingers: list[float]) -> None:
    async def one() -> AsyncIterator[RunEvent]:
        yield event(1)

    bursts = asyncio.run(collect(one()))
    assert [[e.uid for e in burst] for burst in bursts] == [["run-1"]]
    assert lingers == []


def test_events_pouring_in_are_taken_in_larger_bursts_in_order(lingers: list[float]) -> None:
    async def pouring() -> AsyncIterator[RunEvent]:
        for number in range(400):  # far faster than 400 a second
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
            await asyncio.sleep(0.004)  # 250 a second: below the busy rate

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

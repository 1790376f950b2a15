"""Blocking calls handed to threads from the event loop: results, errors, the bound on
threads, cancelled calls, and a loop that closed before its answer."""

from __future__ import annotations

import asyncio
import threading

import pytest

from runplane.service.handoff import Threads


def test_a_call_returns_what_its_function_returns_or_raises() -> None:
    threads = Threads(2, "test-handoff-results")

    async def calls() -> None:
        assert await threads.call(pow, 2, 10) == 1024
        with pytest.raises(ZeroDivisionError):
            await threads.call(divmod, 1, 0)

    asyncio.run(calls())


def test_a_thread_idle_again_takes_the_next_call() -> None:
    threads = Threads(3, "test-handoff-idle")

    async def calls() -> set[str]:
        return {await threads.call(lambda: threading.current_thread().name) for _ in range(20)}

    assert asyncio.run(calls()) == {"test-handoff-idle_0"}


def test_calls_run_on_at_most_the_bound_of_threads() -> None:
    threads = Threads(3, "test-handoff")
    running = threading.Semaphore(0)
    release = threading.Event()

    def held() -> str:
        running.release()
        assert release.wait(5)
        return threading.current_thread().name

    async def calls() -> None:
        many = [asyncio.ensure_future(threads.call(held)) for _ in range(7)]
        await asyncio.sleep(0)  # all seven queued
        for _ in range(3):  # three at once, each on a thread of its own, before any ends
            assert running.acquire(timeout=5)
        release.set()
        names = set(await asyncio.gather(*many))
        assert names == {"test-handoff_0", "test-handoff_1", "test-handoff_2"}

    asyncio.run(calls())
    assert sum(t.name.startswith("test-handoff_") for t in threading.enumerate()) == 3


def test_a_call_cancelled_before_a_thread_takes_it_is_not_made() -> None:
    threads = Threads(1, "test-handoff-one")
    release = threading.Event()
    made: list[str] = []

    async def calls() -> None:
        first = asyncio.ensure_future(threads.call(release.wait, 5))
        second = asyncio.ensure_future(threads.call(made.append, "second"))
        await asyncio.sleep(0)
        second.cancel()
        release.set()
        assert await first
        await threads.call(made.append, "third")  # after the second, were it made

    asyncio.run(calls())
    assert made == ["third"]


def test_a_thread_outlives_a_loop_that_closed_before_its_answer() -> None:
    threads = Threads(1, "test-handoff-closed")
    release = threading.Event()
    returned = threading.Event()

    def held() -> None:
        assert release.wait(5)
        returned.set()

    async def abandoned() -> asyncio.Future[None]:
        call: asyncio.Future[None] = asyncio.ensure_future(threads.call(held))
        await asyncio.sleep(0)
        return call

    loop = asyncio.new_event_loop()
    loop.run_until_complete(abandoned())
    loop.close()
    release.set()
    assert returned.wait(5)
    assert asyncio.run(threads.call(pow, 3, 2)) == 9  # the same, only thread answers

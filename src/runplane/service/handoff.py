"""Blocking calls handed from the event loop to threads of their own, and their results handed
back: the one call every run makes, its submission (a record written, a pod created), waits on
the database and the cluster, and must not hold the loop meanwhile.

asyncio's ``run_in_executor`` wraps each call twice, a concurrent future chained to an asyncio
one through callbacks under their locks, and its executor checks a semaphore at each call to
decide whether to start a thread: 40-45 µs of CPU per call here. A queue the threads read, and
the result set on the loop's future from the thread, take 15 (docs/decisions.md, "Runs are
submitted on a thread pool of their own").
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class Threads:
    """At most ``most`` threads named ``name_N``, started as calls find none idle. They are
    daemons, as the calls they run are requests: the server answers (or drops) those before
    it stops."""

    def __init__(self, most: int, name: str) -> None:
        self._most = most
        self._name = name
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        #: Threads waiting for a call that no call queued since has claimed.
        self._idle = 0

    async def call(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """``fn(*args)`` on one of the threads; what it returns or raises. A call cancelled
        before a thread takes it is not made."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._calls.put((loop, future, fn, args))
        self._claim()
        return await future

    def _claim(self) -> None:
        """An idle thread for the call just queued, or a new one if none is idle and the bound
        allows it (else the call waits for the first thread to finish)."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            if self._started == self._most:
                return
            number = self._started
            self._started += 1
        name = f"{self._name}_{number}"
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            loop, future, fn, args = self._calls.get()
            if future.cancelled():  # read across threads: a flag, set once
                self._idle_again()
                continue
            try:
                result = fn(*args)
            except BaseException as error:  # the caller's to handle, as its own call's
                self._idle_again()
                _hand(loop, _failed, future, error)
            else:
                self._idle_again()
                _hand(loop, _resolved, future, result)

    def _idle_again(self) -> None:
        """Counted idle before the answer is handed back: the caller's next call, made as
        soon as it has the answer, finds this thread idle rather than starting another."""
        with self._lock:
            self._idle += 1


def _hand(loop: asyncio.AbstractEventLoop, done: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for the answer
        loop.call_soon_threadsafe(done, *args)


def _resolved(future: asyncio.Future[Any], result: Any) -> None:
    if not future.cancelled():
        future.set_result(result)


def _failed(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(error)

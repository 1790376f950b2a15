"""Live streams: how many may be open, and one reader of a run's output however many follow it.

A stream holds a connection for as long as a page is open, so what streams may cost is bounded
twice. Their number: :class:`StreamSlots` admits at most ``per_user`` streams of one user and
``total`` in all, and refuses the next with a reason and when to try again (a 429). Their work:
the reads they need (a run's output, its record) run on threads of their own
(:meth:`StreamSlots.off_loop`, a few at a time), never on the request workers the API's routes
use, and :class:`LogFollowers` reads each followed run's output once for all its streams
(:class:`LogFollower`), waking on the run's changes and otherwise rarely. A stream waiting for
output holds no thread and reads nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

from runplane.service.feed import RunFeed

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")

#: Threads that read for streams at once (each read is short: a row, a chunk of a file).
STREAM_THREADS = 4
#: Pauses between reads of a live run's output while nothing arrives (output is not an
#: event; the run's changes wake the reader at once). After each, the reader wakes its
#: streams (a beat), so that they see a shutdown or a logout within the longest pause.
LOG_PAUSES = (0.25, 0.5, 1.0)
#: The most of a run's recent output kept for its streams (a stream further behind reads on
#: its own until it catches up): memory stays within this per followed run, and followed
#: runs are at most ``service.live_streams.total``.
KEPT_BYTES = 256 << 10
#: The most a stream is sent at once.
CHUNK_BYTES = 64 << 10


class StreamsRefused(Exception):
    """No slot for another stream: ``reason`` says which limit, ``retry_after`` (seconds)
    when to try again."""

    def __init__(self, reason: str, retry_after: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass(slots=True)
class Slot:
    """One open stream of ``user``; :meth:`release` (idempotent) gives it back."""

    user: str
    _slots: StreamSlots
    _held: bool = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._slots._give_back(self.user)


class StreamSlots:
    """Counts open streams per user and in all; the limits come from
    ``service.live_streams``."""

    def __init__(self, per_user: int, total: int, retry_after: int) -> None:
        self.per_user, self.total, self.retry_after = per_user, total, retry_after
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}
        self._count = 0
        self._limiter: CapacityLimiter | None = None

    def take(self, user: str) -> Slot:
        """A slot for a new stream of ``user``, or :class:`StreamsRefused` saying which limit
        is reached."""
        with self._lock:
            mine = self._open.get(user, 0)
            if mine >= self.per_user:
                raise StreamsRefused(
                    f"user {user!r} has {mine} live streams open, the most one user may "
                    f"(service.live_streams.per_user = {self.per_user}); close a page that "
                    f"follows runs, or try again in {self.retry_after} s",
                    self.retry_after,
                )
            if self._count >= self.total:
                raise StreamsRefused(
                    f"the service has {self._count} live streams open, the most it serves "
                    f"(service.live_streams.total = {self.total}); try again in "
                    f"{self.retry_after} s",
                    self.retry_after,
                )
            self._open[user] = mine + 1
            self._count += 1
        return Slot(user, self)

    def _give_back(self, user: str) -> None:
        with self._lock:
            self._count -= 1
            left = self._open[user] - 1
            if left:
                self._open[user] = left
            else:
                del self._open[user]

    @property
    def open(self) -> int:
        with self._lock:
            return self._count

    async def off_loop(self, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """``call(*args)`` on a stream thread: never on the request workers, and never more
        than :data:`STREAM_THREADS` at once, however many streams wait."""
        if self._limiter is None:
            self._limiter = CapacityLimiter(STREAM_THREADS)
        return await anyio.to_thread.run_sync(lambda: call(*args, **kwargs), limiter=self._limiter)


class LogFollower:
    """The output of one run as it is written, read once for all the streams that follow it.

    It keeps the last :data:`KEPT_BYTES` it read; a stream at an offset within them is served
    from memory, one behind reads on its own (:meth:`LogFollowers.read`) until it catches up.
    ``done`` once the run ended and all its output was read, or once reading failed
    (``failed``: its streams end without saying the run did, and browsers connect again).
    """

    def __init__(self, start: int) -> None:
        self.base = start  # the offset of kept[0]
        self.kept = bytearray()
        self.done = False
        self.failed = False
        self.followers = 0
        self.changed = asyncio.Condition()
        self.task: asyncio.Task[None] | None = None

    @property
    def end(self) -> int:
        return self.base + len(self.kept)

    def since(self, position: int) -> bytes | None:
        """What was read from ``position`` on (at most :data:`CHUNK_BYTES`); ``None`` when
        ``position`` is before what is kept."""
        if position < self.base:
            return None
        at = position - self.base
        return bytes(self.kept[at : at + CHUNK_BYTES])

    def add(self, chunk: bytes, after: int) -> None:
        """``chunk``, read from :attr:`end`, and the offset the next read starts at; output
        the runtime skipped (a capped log's middle) leaves nothing kept before ``after``."""
        if after != self.end + len(chunk):
            self.kept.clear()
            self.base = after
            return
        self.kept += chunk
        if len(self.kept) > KEPT_BYTES:
            drop = len(self.kept) - KEPT_BYTES
            del self.kept[:drop]
            self.base += drop


class LogFollowers:
    """One :class:`LogFollower` per followed run, started by its first stream and stopped
    after its last (all on the service's event loop)."""

    def __init__(
        self,
        slots: StreamSlots,
        feed: RunFeed,
        read: Callable[[str, int], tuple[bytes, int]],
        finished: Callable[[str], bool],
    ) -> None:
        self._slots, self._feed = slots, feed
        self._read, self._finished = read, finished
        self._running: dict[str, LogFollower] = {}

    async def read(self, uid: str, position: int) -> tuple[bytes, int]:
        return await self._slots.off_loop(self._read, uid, position)

    @contextlib.asynccontextmanager
    async def follow(self, uid: str, start: int) -> AsyncIterator[LogFollower]:
        """The run's follower, started at ``start`` unless it runs already."""
        follower = self._running.get(uid)
        if follower is None:
            follower = LogFollower(start)
            self._running[uid] = follower
            follower.task = asyncio.get_running_loop().create_task(self._reader(uid, follower))
        follower.followers += 1
        try:
            yield follower
        finally:
            follower.followers -= 1
            if not follower.followers and follower.task is not None:
                follower.task.cancel()
                if self._running.get(uid) is follower:
                    del self._running[uid]

    async def _reader(self, uid: str, follower: LogFollower) -> None:
        try:
            async with self._feed.subscribe() as changes:
                finished = await self._slots.off_loop(self._finished, uid)
                pause = 0
                while True:
                    chunk, after = await self.read(uid, follower.end)
                    if chunk:
                        follower.add(chunk, after)
                        pause = 0
                        async with follower.changed:
                            follower.changed.notify_all()
                        continue
                    if finished:
                        break
                    changed = await changes.changed(LOG_PAUSES[pause])
                    pause = min(pause + 1, len(LOG_PAUSES) - 1)
                    if uid in changed or None in changed:
                        finished = await self._slots.off_loop(self._finished, uid)
                    async with follower.changed:  # the beat
                        follower.changed.notify_all()
        except Exception:
            follower.failed = True
            log.warning(
                "reading the output of run %s for its live pages failed", uid, exc_info=True
            )
        finally:
            follower.done = True
            if self._running.get(uid) is follower:
                del self._running[uid]
            with contextlib.suppress(RuntimeError):  # the loop is closing
                async with follower.changed:
                    follower.changed.notify_all()

    @property
    def running(self) -> int:
        return len(self._running)

"""Which runs changed, as the service records them: the source of live pages.

The recorder publishes the uids of each burst it writes; a subscriber (a browser's event
stream) receives them on its own event loop and reads only the runs that changed. Nothing
polls the database on a timer, and a burst costs nothing when nobody listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterable

#: Uids a subscriber may have waiting before it is told to reload instead (a slow client).
_BACKLOG = 4096


class Subscription:
    """The uids changed since the subscriber last looked; ``None`` in the set means "too
    many to list: reload everything"."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._pending: set[str | None] = set()
        self._ready = asyncio.Event()

    def _add(self, uids: frozenset[str]) -> None:  # on the subscriber's loop
        if len(self._pending) + len(uids) > _BACKLOG:
            self._pending = {None}
        elif None not in self._pending:
            self._pending |= uids
        self._ready.set()

    async def changed(self, timeout: float) -> set[str | None]:
        """What changed, as soon as anything has; an empty set after ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout)
        self._ready.clear()
        changed, self._pending = self._pending, set()
        return changed


class RunFeed:
    """Publishes changed run uids from any thread to subscribers on their event loops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[Subscription] = []

    def publish(self, uids: Iterable[str]) -> None:
        changed = frozenset(uids)
        if not changed:
            return
        with self._lock:
            subscribers = list(self._subscribers)
        for subscription in subscribers:
            with contextlib.suppress(RuntimeError):  # its loop closed: it is leaving
                subscription._loop.call_soon_threadsafe(subscription._add, changed)

    @contextlib.asynccontextmanager
    async def subscribe(self) -> AsyncIterator[Subscription]:
        subscription = Subscription(asyncio.get_running_loop())
        with self._lock:
            self._subscribers.append(subscription)
        try:
            yield subscription
        finally:
            with self._lock:
                self._subscribers.remove(subscription)

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subscribers)

"""A follower's live pages: the runs another replica (the leader) changed, read from the
shared database and published to this replica's feed.

A follower records no event, so its :class:`~runplane.service.feed.RunFeed` would stay
silent: while anyone here listens, the runs changed since the last read are read every
``interval`` (by ``updated_at``'s index) and published; nobody listening, nothing is read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from runplane.service.feed import RunFeed
from runplane.service.records import RunStore

log = logging.getLogger(__name__)

#: Runs read at most per pass: more than a subscriber keeps before it reloads everything.
_MOST = 4097


class ReplicaFeed:
    def __init__(
        self, store: RunStore, feed: RunFeed, interval: float, until: Callable[[], bool]
    ) -> None:
        self._store, self._feed, self._interval = store, feed, interval
        #: Whether to stop (this replica leads now: its recorder publishes, or it closes).
        self._until = until
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="runplane-replica-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        since = time.time()
        while not self._stop.wait(self._interval) and not self._until():
            if not self._feed.subscribers:
                since, self._told = time.time(), frozenset()
                continue
            try:
                since = self.publish(since)
            except Exception:  # the next pass reads again from the same time
                log.warning("runs changed by the leader could not be read", exc_info=True)

    #: Runs changed at the time the next read starts from, already published.
    _told: frozenset[str] = frozenset()

    def publish(self, since: float) -> float:
        """Publish the runs changed since ``since`` (inclusive; those published already at
        that very time left out); the time to read from next."""
        changed = self._store.list_runs(updated_since=since, limit=_MOST, brief=True)
        self._feed.publish(run.uid for run in changed if run.uid not in self._told)
        latest = max((run.updated_at for run in changed), default=since)
        self._told = frozenset(run.uid for run in changed if run.updated_at == latest)
        return latest

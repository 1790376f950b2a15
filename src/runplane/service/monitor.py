"""The monitor: one thread that acts when a run's time is up.

It aborts runs that stay too long in a condition (state thresholds), ends the spot wait of
attempts that found no spot node in time, launches decided attempts when they are due, and
stops the runs other processes asked to abort. It sleeps until the soonest deadline, woken
early when a sooner one is recorded.

In the leading replica of several (``service.leader_election``) it also picks up, every
``pickup_interval``, what the other replicas recorded for it: runs submitted to them, which
it launches, and aborts asked of them, which it carries out.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from runplane.runs import Reason, RunState
from runplane.runtimes.events import RunEvent
from runplane.service.launcher import Launcher
from runplane.service.recorder import Recorder
from runplane.service.shared import Shared

log = logging.getLogger(__name__)

#: How often abort requests of other processes are read, at most (seconds).
_ABORT_POLL = 0.2
_SPOT_FALLBACK_TEXT = (
    "no spot node was found in time (retry.spot_fallback.pending); the next attempt runs on "
    "on-demand nodes"
)


class Monitor:
    def __init__(
        self,
        shared: Shared,
        recorder: Recorder,
        launcher: Launcher,
        executor: int | None,
        pickup: float | None = None,
        recheck: tuple[Callable[[], object], float] | None = None,
    ) -> None:
        self.shared = shared
        self.recorder = recorder
        self.launcher = launcher
        #: The pid whose abort requests this monitor serves (``None``: a durable runtime's
        #: runs are aborted by whoever asks, through the cluster).
        self._executor = executor
        #: Seconds between reads of what replicas recorded for the leader (``None``: alone).
        self._pickup = pickup
        #: What to call every so many seconds (the runs budgets hold), beside the rest.
        self._recheck = recheck
        #: Runs of replicas launched, and aborts begun, by this leader: each once (aborts
        #: are begun from requests and from the pickup's thread).
        self._picked: set[str] = set()
        self._stopping: set[str] = set()
        self._stopping_lock = threading.Lock()
        self._retries = ThreadPoolExecutor(max_workers=4, thread_name_prefix="runplane-retry")
        self._thread = threading.Thread(target=self._watch, name="runplane-monitor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """Stop watching (after :meth:`LiveRuns.close`) and finish the launches begun."""
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._retries.shutdown(wait=True)

    def stop(self, uid: str) -> bool:
        """Abort a run a person asked to stop: its attempt through the runtime, or, between
        attempts, the run itself (nothing runs to stop); ``False`` if neither had anything."""
        with self._stopping_lock:
            self._stopping.add(uid)
        if self.shared.runtime.abort(uid, Reason.ABORTED, "aborted by request"):
            return True
        record = self.shared.store.get(uid)
        if record.finished:
            return False
        if record.reason == Reason.AWAITING_LEADER and record.state is RunState.CREATED:
            message = "aborted by request before the leading replica launched it"
        elif record.reason == Reason.BUDGET and record.state is RunState.PENDING:
            message = "aborted by request while its project's budget held it"
        elif record.retry_at is None:
            return False
        else:
            message = f"aborted by request before attempt {record.attempt} started"
        aborted = RunEvent(
            uid, RunState.ABORTED, reason=Reason.ABORTED, message=message, attempt=record.attempt
        )
        self.recorder.write([aborted])
        return True

    def _watch(self) -> None:
        live = self.shared.live
        next_poll = next_pickup = next_recheck = time.monotonic()
        while not live.closed:
            with live.lock:
                now = time.time()
                breaches, spot_waits, due = live.take_due(now)
                if not (breaches or spot_waits or due):
                    timeout = _ABORT_POLL
                    if self._pickup is not None:  # each read when due, not at the next poll
                        timeout = min(timeout, max(next_pickup - time.monotonic(), 0.0))
                    if (deadline := live.next_deadline()) is not None:
                        timeout = min(timeout, max(deadline - now, 0.0))
                    live.lock.wait(timeout)
            # Aborts on a cluster are API calls; breaches due together are aborted together,
            # each reported aborting as it is decided (not as an abort thread comes free).
            ends = [(b.uid, Reason.THRESHOLD, b.text) for b in breaches]
            ends += [(w.uid, Reason.SPOT_UNAVAILABLE, _SPOT_FALLBACK_TEXT) for w in spot_waits]
            for uid, reason, text in ends:
                self._decided_abort(uid, reason, text)
            for uid, attempt in due:
                self._retries.submit(self.launcher.launch_retry, uid, attempt)
            if self._executor is not None and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + _ABORT_POLL
                for uid in self.shared.store.abort_requests(self._executor):
                    self.stop(uid)
            if self._recheck is not None and time.monotonic() >= next_recheck:
                call, every = self._recheck
                next_recheck = time.monotonic() + every
                try:
                    self._retries.submit(call)
                except RuntimeError:  # no new work once the interpreter is shutting down
                    return
            if self._pickup is not None and time.monotonic() >= next_pickup:
                next_pickup = time.monotonic() + self._pickup
                try:
                    self._pick_up()
                except Exception:  # the next read tries again
                    log.exception("reading what other replicas recorded failed")

    def _decided_abort(self, uid: str, reason: str, text: str) -> None:
        try:
            self.shared.runtime.aborting(uid, reason, text)
        except Exception:  # the abort below reports it as it begins
            log.exception("run %s: reporting its abort failed", uid)
        self.shared.aborts.submit(self.shared.runtime.abort, uid, reason, text)

    def _pick_up(self) -> None:
        """Carry out the aborts other replicas recorded, then launch the runs they recorded
        (each once: a run still ``created`` after its launch is not launched again)."""
        store, runtime = self.shared.store, self.shared.runtime.name
        asked = store.cluster_abort_requests(runtime)
        with self._stopping_lock:
            fresh_aborts = [uid for uid in asked if uid not in self._stopping]
            self._stopping = set(asked)  # those that ended are forgotten
        for uid in fresh_aborts:
            self.shared.aborts.submit(self._stop_logged, uid)
        awaiting = store.awaiting_leader(runtime)
        fresh = [uid for uid in awaiting if uid not in self._picked]
        self._picked.intersection_update(awaiting)
        self._picked.update(fresh)
        if fresh:
            self._retries.submit(self.launcher.relaunch, fresh)

    def _stop_logged(self, uid: str) -> None:
        try:
            self.stop(uid)
        except Exception:
            log.exception("run %s: aborting it as another replica was asked failed", uid)

"""Each run's output, copied from the kubelet as its pod writes it, into the run's directory.

The pod log API serves a pod's output only while the pod and its node exist, and reads it from
the start or from a point in time. So runplane follows the log of each started pod of its runs
(``follow=true``, every line stamped with its time) and appends the lines to the run's
output as a local run's are (:func:`runplane.runtimes.output.append_output`, under the cap,
all the lines a read brought at once): offsets into it stay valid, a finished run's output
outlives its pod and node, and ``runplane logs -f`` reads a file instead of the pod log from
its start. Once the pod ended and its last read is done the output is closed
(:func:`~runplane.runtimes.output.finish_output`: the held end after its marker, compressed);
a retried run's next pod reopens it and appends after. A dropped stream resumes from the whole
second before the last copied line's (``sinceTime``), skipping as many lines as were copied
from that second on: a pod's stdout and stderr are stamped apart, so the log's order is not
always its times' order, and a resume that trusted the times would copy a line again or lose
one. How far the copy got is
kept beside the file (``output.cursor``: the bytes appended as the cap counts them, the start,
the dropped and the held end together), so a restarted service resumes where the last one
stopped, and never copies a line twice: the output is cut back to what the cursor recorded
(:func:`~runplane.runtimes.output.cut_output`).

What a copy costs is bounded, whatever the number of live runs: at most ``follows`` logs are
followed at once, by as many threads over a connection pool of their own (so a busy spool never
takes a connection from pod creation or the watch); the other started pods wait their turn,
the longest waiting first, and a pod that ends is copied in full before its end is reported,
whether it was being followed or not. A node whose kubelet refuses to serve logs (unreachable,
or a node without a kubelet) is asked again by one pod at a time, after a pause that grows to
minutes; its other pods wait parked on the node, out of the queue, until it serves, instead of
each asking. One idle copier at a time waits for the time of the queue's next copy, the others
for work: a time coming wakes one thread, not every idle copier (which, with the pods of
hundreds of nodes that serve no logs in the queue, was half the service's context switches).

A replica that does not lead watches no pods, so nothing tells its spool what to follow; asked
for a run's output, it catches up instead (:meth:`LogSpool.catch_up`): one read of each of the
run's pods' logs from its own cursor on, through the same appender, so it answers the very
bytes the leader's copy holds, and a replica that takes the lead later resumes from there.

The last line a pod prints may be the results the bootstrap could not fit in the termination
message (:data:`runplane.bootstrap.RESULTS_MARKER`); it goes to ``results.json`` instead of
the output.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import json
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from runplane.bootstrap import RESULTS_MARKER
from runplane.runtimes.kubernetes.api.backoff import Backoff
from runplane.runtimes.kubernetes.api.rest import CONNECTION_ENDED, RestApi, pods_path, shutdown
from runplane.runtimes.output import (
    HELD,
    OUTPUT,
    append_output,
    cut_output,
    finish_output,
    output_size,
    private_dir,
    read_output,
)

log = logging.getLogger(__name__)

CURSOR = "output.cursor"
RESULTS = "results.json"
_MARKER = RESULTS_MARKER.encode()
#: Reads of a finished pod's last output that may fail on a broken connection before giving up.
_LAST_TRIES = 3
#: How often (seconds) a copy that goes on records how far it got.
_SAVE_EVERY = 1.0
#: A second in the pod log's unit of time, nanoseconds.
_SECOND = 1_000_000_000
#: How often (seconds) a replica that does not lead asks the API for one run's new output.
CATCH_UP_EVERY = 1.0
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


@dataclass(frozen=True)
class PodLog:
    """One of a run's pods, as a catch-up reads it (:meth:`LogSpool.catch_up`)."""

    name: str
    container: str = "main"
    node: str = ""
    attempt: int = 1
    ended: bool = False  # the pod has ended: its read is the last, and closes the output


@dataclass
class Cursor:
    """How far the copy of a run's output got."""

    pod: str = ""  # the pod being copied (a retried run has one per attempt)
    at: int = -1  # a whole second, in ns since the epoch, from which a resume reads again
    seen: int = 0  # how many copied lines are stamped at or after it (a resume skips them)
    size: int = 0  # the bytes appended to the output after them (output_size)
    complete: bool = False  # the pod has ended, all of its output is copied, the output closed
    attempt: int = 0  # the run attempt of that pod


def stamp_ns(stamp: str) -> int:
    """The kubelet's RFC 3339 line time in ns, exact (a float would lose the nanoseconds)."""
    match = _STAMP.fullmatch(stamp)
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {stamp!r}")
    whole, fraction, zone = match.groups()
    seconds = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return int(seconds) * _SECOND + int((fraction or "0").ljust(9, "0"))


class LogSpool:
    """Copies the output of the pods it is told about into ``<runs>/<uid>/output.log``.

    Thread-safe: the watch thread starts and finishes copies, copier threads read the logs,
    API threads read the files.
    """

    def __init__(
        self,
        rest: RestApi,
        namespace: str,
        runs: Path,
        *,
        cap: int = 32 << 20,
        follows: int = 64,
        idle_timeout: float = 60.0,
        drain_timeout: float = 10.0,
    ) -> None:
        self._rest = rest
        self._namespace = namespace
        self._runs = runs
        self.cap = cap  # the most output a run keeps (Settings.retention.max_output_bytes)
        self.follows = follows
        self.idle_timeout = idle_timeout
        self._drain_timeout = drain_timeout
        mutex = threading.RLock()
        self._lock = threading.Condition(mutex)  # idle copiers wait on it for work
        self._head = threading.Condition(mutex)  # the copier timing the queue waits on it
        self._copies: dict[str, _Copy] = {}  # by run uid: the copy of its current pod
        self._ready: list[tuple[float, int, _Copy]] = []  # a heap: when each may read next
        self._order = itertools.count()
        self._nodes: dict[str, _Refusals] = {}  # nodes not known to serve logs, being asked
        self._serving: set[str] = set()  # nodes that served a log since they last refused
        self._copiers: list[threading.Thread] = []
        self._idle = 0  # copiers waiting for work
        self._timing = False  # whether one of them waits for the time of the queue's first
        self._closed = False
        self.catch_up_every = CATCH_UP_EVERY
        self._caught_up: dict[str, tuple[threading.Lock, list[float]]] = {}  # uid: lock, when

    def follow(
        self, uid: str, pod: str, container: str = "main", node: str = "", attempt: int = 1
    ) -> None:
        """Copy ``pod``'s output as it is written (its container has started, on ``node``)."""
        with self._lock:
            if not self._earlier(uid, attempt):
                self._copy_of(uid, pod, container, node, attempt)

    def finish(
        self, uid: str, pod: str, container: str = "main", node: str = "", attempt: int = 1
    ) -> None:
        """``pod`` has ended: copy the rest of its output, waiting a little for it, so that the
        run is reported ended with its whole output in place. A copy waiting for its turn is
        read here and now, not after the followed ones. A pod of an attempt earlier than the
        one copied now (seen late, or listed again after a restart) is left alone: its output
        was copied before the later attempt's began."""
        with self._lock:
            if self._earlier(uid, attempt):
                return
            copy = self._copy_of(uid, pod, container, node, attempt)
            closed = self._closed
            if copy is not None:
                copy.ended = True
                inline = not copy.reading and not copy.done.is_set()
                if inline:
                    copy.reading = True  # taken from the queue: no copier starts it meanwhile
                    copy.queued = False
                elif copy.reading and copy.response is not None and copy.stalled():
                    shutdown(copy.response)  # a follow that waits for lines that will not come
        if copy is None:
            directory = self._runs / uid
            if (
                not closed
                and (os.path.lexists(directory / HELD) or os.path.lexists(directory / OUTPUT))
                and _read_cursor(directory).attempt <= attempt
            ):
                _close_output(directory, self.cap)  # copied, but a service stopped before
            return
        if inline:
            self._step(copy)
        copy.done.wait(self._drain_timeout)

    def catch_up(self, uid: str, pods: list[PodLog]) -> None:
        """Bring the copy of ``uid``'s output up to what its ``pods`` logged, in one read of
        each (a replica that does not lead, and so follows no log, asked for the output). An
        ended pod's read is its last, as :meth:`finish` makes it; a running pod's stops at the
        end of what it wrote, a cut line left for the next catch-up. Readers of one run share
        a catch-up, at most one every ``catch_up_every`` seconds; a pod that cannot be
        read (gone, its node refusing) leaves what was copied as it was."""
        with self._lock:
            lock, last = self._caught_up.setdefault(uid, (threading.Lock(), [0.0]))
        with lock:
            if time.monotonic() - last[0] < self.catch_up_every:
                return
            for pod in sorted(pods, key=lambda pod: pod.attempt):
                if pod.ended:
                    self.finish(uid, pod.name, pod.container, pod.node, pod.attempt)
                    continue
                with self._lock:
                    if self._closed or self._earlier(uid, pod.attempt):
                        continue
                directory = self._runs / uid
                cursor = _read_cursor(directory)
                if pod.attempt < cursor.attempt or (cursor.pod == pod.name and cursor.complete):
                    continue
                _Copy(self, uid, pod.name, pod.container, pod.node, directory, pod.attempt).once()
            last[0] = time.monotonic()

    def _earlier(self, uid: str, attempt: int) -> bool:
        """Whether ``attempt`` is earlier than the one whose pod is copied now (lock held)."""
        copy = self._copies.get(uid)
        return copy is not None and attempt < copy.attempt

    def _copy_of(self, uid: str, pod: str, container: str, node: str, attempt: int) -> _Copy | None:
        """The copy of ``uid``'s output from ``pod``, made and queued if new (lock held)."""
        if self._closed:
            return None
        copy = self._copies.get(uid)
        if copy is not None and copy.pod == pod:
            return copy
        directory = self._runs / uid
        cursor = _read_cursor(directory)
        if (cursor.pod == pod and cursor.complete) or attempt < cursor.attempt:
            return None
        if copy is not None:  # an earlier attempt's pod, which has ended
            copy.stop()
        copy = self._copies[uid] = _Copy(self, uid, pod, container, node, directory, attempt)
        self._queue(copy, time.monotonic())
        return copy

    def _queue(self, copy: _Copy, at: float) -> None:
        """Let ``copy`` read again from ``at`` on (lock held); a copier is started if none is
        free and the bound allows one more. A pod of a node being asked for its first log,
        or resting after a refusal, waits parked on the node instead (:meth:`_parked`)."""
        copy.queued = True
        refusals = self._refusals(copy)
        if refusals is not None:
            if self._parked(copy, refusals):
                return
            at = max(at, refusals.until)
        heapq.heappush(self._ready, (at, next(self._order), copy))
        if self._ready[0][2] is copy:  # whoever waits for the first's time looks again
            (self._head if self._timing else self._lock).notify()
        if self._idle == 0 and len(self._copiers) < self.follows:
            copier = threading.Thread(
                target=self._serve, name=f"runplane-logs-{len(self._copiers)}", daemon=True
            )
            self._copiers.append(copier)
            copier.start()

    def _serve(self) -> None:
        """A copier: take the copy whose turn it is, read it once, queue it again or let it go."""
        while (copy := self._next()) is not None:
            try:
                self._step(copy)
            except Exception:  # one copy's failure must not end the others'
                log.exception("copying the output of pod %s failed", copy.pod)
                self._retire(copy)

    def _next(self) -> _Copy | None:
        """The copy whose turn it is, waiting for it. One idle copier at a time waits for the
        time of the queue's first copy; the others wait to be woken for work, so that a time
        coming wakes one copier, not all of them."""
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                while self._ready and self._ready[0][0] <= now:
                    _, _, copy = heapq.heappop(self._ready)
                    if copy.done.is_set():  # stopped: the next pod of its node asks it
                        self._let_go(copy)
                        continue
                    if not copy.queued:
                        continue  # taken by a finish meanwhile, which lets it go after
                    if not copy.ended and copy.node not in self._serving:
                        # A node not known to serve logs, or never asked: one pod asks it.
                        refusals = self._nodes.setdefault(copy.node, _Refusals())
                        if self._parked(copy, refusals) or refusals.until > now:
                            if refusals.asking is copy:  # its node rests: it asks after
                                heapq.heappush(
                                    self._ready, (refusals.until, next(self._order), copy)
                                )
                            continue
                    copy.queued = False
                    copy.reading = True
                    if self._ready and not self._timing:
                        self._lock.notify()  # another copier waits for the next one's time
                    return copy
                self._idle += 1
                if self._ready and not self._timing:
                    self._timing = True
                    self._head.wait(self._ready[0][0] - now)
                    self._timing = False
                else:
                    self._lock.wait()
                self._idle -= 1
        return None

    def _refusals(self, copy: _Copy) -> _Refusals | None:
        """The refusals of ``copy``'s node, if its pods wait for its answer (lock held): not
        an ended pod's, which is read now, nor a node's that serves logs."""
        if copy.ended or copy.node in self._serving:
            return None
        return self._nodes.get(copy.node)

    def _parked(self, copy: _Copy, refusals: _Refusals) -> bool:
        """Whether ``copy`` waits parked on its node (lock held): a node not known to serve
        logs is asked by one of its pods at a time, the first, or the next after that one
        is gone; the others wait out of the queue, so that no copier wakes for them, until
        the node serves a log (:meth:`served`)."""
        if refusals.asking is None:
            refusals.asking = copy
        if refusals.asking is copy:
            return False
        refusals.parked[copy] = None
        return True

    def served(self, node: str) -> None:
        """``node`` answered a log request: the pods parked on it are queued at once."""
        with self._lock:
            refusals = self._nodes.pop(node, None)
            self._serving.add(node)
            if refusals is not None:
                now = time.monotonic()
                for copy in refusals.parked:
                    if copy.queued and not copy.done.is_set():
                        self._queue(copy, now)

    def serves(self, node: str) -> bool:
        """Whether ``node``'s kubelet answered a log request through the API server."""
        with self._lock:
            return node in self._serving

    def serves_any(self) -> bool:
        """Whether any node's kubelet answered a log request through the API server."""
        with self._lock:
            return bool(self._serving)

    def refusing(self, node: str) -> bool:
        """Whether ``node`` refused every log request lately (a node without a kubelet API):
        even an ended pod's last output is not asked of it."""
        refusals = self._nodes.get(node)
        return refusals is not None and refusals.count >= _HOPELESS

    def _step(self, copy: _Copy) -> None:
        """One read of ``copy``; then it is queued again, or retired when all is copied."""
        try:
            outcome = copy.read()
        except Exception:  # a disk that failed under it: the pod's end is still reported
            log.exception("copying the output of run %s from pod %s", copy.uid, copy.pod)
            outcome = _Outcome.DONE
        with self._lock:
            copy.reading = False
            if outcome is _Outcome.REFUSED:
                self._serving.discard(copy.node)
                refusals = self._nodes.setdefault(copy.node, _Refusals())
                refusals.count += 1
                refusals.until = time.monotonic() + _NODE_BACKOFF.delay(refusals.count)
            if outcome is _Outcome.DONE or self._closed or copy.stopped:
                self._retire(copy)
                return
            delay = 0.0 if copy.ended else copy.pause()
            if outcome is _Outcome.REFUSED and not copy.ended:
                delay = 0.0  # it asks again once its node has rested (_queue)
            self._queue(copy, time.monotonic() + delay)

    def _retire(self, copy: _Copy) -> None:
        """``copy`` is done; if it was the one to ask its node, the next pod parked on the
        node asks in its place."""
        copy.done.set()
        with self._lock:
            if self._copies.get(copy.uid) is copy:
                del self._copies[copy.uid]
            self._let_go(copy)

    def _let_go(self, copy: _Copy) -> None:
        """``copy`` no longer waits for its node (lock held); if it was the one to ask it,
        the first pod parked there that still waits asks in its place (an ended one is
        read now, and the next is looked for)."""
        refusals = self._nodes.get(copy.node)
        if refusals is None:
            return
        refusals.parked.pop(copy, None)
        if refusals.asking is not copy:
            return
        refusals.asking = None
        while refusals.parked and refusals.asking is None:
            successor = next(iter(refusals.parked))
            del refusals.parked[successor]
            if successor.queued and not successor.done.is_set():
                self._queue(successor, time.monotonic())

    def read(self, uid: str, offset: int) -> tuple[bytes, int]:
        return read_output(self._runs / uid / OUTPUT, offset)

    def results(self, uid: str) -> dict[str, Any] | None:
        """The report the run's pod printed as its last line, if it printed one there."""
        try:
            report: dict[str, Any] = json.loads((self._runs / uid / RESULTS).read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        return report

    def close(self) -> None:
        """Stop copying; the cursors keep where each copy got to, for the next service."""
        with self._lock:
            self._closed = True
            copies = list(self._copies.values())
            self._lock.notify_all()
            self._head.notify_all()
        for copy in copies:
            copy.stop()
        for copier in self._copiers:
            copier.join(2.0)

    def stream(self, pod: str, query: dict[str, Any]) -> urllib3.BaseHTTPResponse:
        # A last read (no follow) may hold up the report of its pod's end: no longer than
        # the drain allows; a follow waits for lines as long as a quiet container may be.
        wait = self.idle_timeout if query.get("follow") else self._drain_timeout
        timeout = (min(10.0, wait), wait)
        return self._rest.stream(pods_path(self._namespace, pod) + "/log", query, timeout=timeout)


class _Outcome(enum.Enum):
    COPIED = "copied"  # the read brought lines (the stream ended or broke after them)
    NOTHING = "nothing"  # it brought none: the stream broke, or the container is quiet
    REFUSED = "refused"  # the node's kubelet did not serve the log
    DONE = "done"  # all there is was copied, or there is nothing more to have


@dataclass
class _Refusals:
    """A node not known to serve logs: how often it refused in a row, until when it rests,
    the copy that asks it (one at a time) and the others, parked in order until it serves."""

    count: int = 0
    until: float = 0.0
    asking: _Copy | None = None
    parked: dict[_Copy, None] = field(default_factory=dict)


#: Refusals in a row after which a node is not asked even for an ended pod's last output.
_HOPELESS = 3
#: How long a node that refused to serve logs rests before it is asked again.
_NODE_BACKOFF = Backoff(initial=2.0, maximum=300.0)


class _Copy:
    """One pod's output into its run's file: follow the log, resume it after a break, and
    once the pod has ended read what is left. A spool copier reads it, one read at a time."""

    def __init__(
        self,
        spool: LogSpool,
        uid: str,
        pod: str,
        container: str,
        node: str,
        directory: Path,
        attempt: int = 1,
    ) -> None:
        self.spool = spool
        self.uid = uid
        self.pod = pod
        self.attempt = attempt
        self.container = container
        self.node = node
        self.ended = False  # the pod has ended: read the rest, then stop
        self.stopped = False
        self.queued = False
        self.reading = False
        self.done = threading.Event()  # all copied, or given up
        self.response: urllib3.BaseHTTPResponse | None = None
        self._directory = directory
        self._cursor: Cursor | None = None
        self._failures = 0  # reads in a row that brought nothing
        self._last_tries = 0  # reads of an ended pod that failed
        self._last_line = time.monotonic()
        self._backoff = Backoff(initial=0.2, maximum=5.0)

    def stop(self) -> None:
        self.stopped = True
        self.queued = False
        if self.response is not None:
            shutdown(self.response)
        self.done.set()

    def stalled(self) -> bool:
        """Whether a follow has brought nothing for a while (its pod ended, the stream did
        not say so)."""
        return time.monotonic() - self._last_line > 1.0

    def pause(self) -> float:
        return self._backoff.delay(self._failures)

    def read(self) -> _Outcome:
        """One read of the pod log from the cursor on; once an ended pod's output is all
        copied (or can be had no more), the output is closed."""
        outcome = self._read()
        if outcome is _Outcome.DONE and self.ended and not self.stopped:
            if self._cursor is not None:  # first: a restart finds it complete, and closes it
                self._cursor.complete = True
                _write_cursor(self._directory, self._cursor)
            _close_output(self._directory, self.spool.cap)  # none there: nothing to do
        return outcome

    def once(self) -> None:
        """One read of a running pod's log to its present end, without following it."""
        try:
            self._copy(self._start(), follow=False, final=False)
        except (ApiException, *CONNECTION_ENDED) as error:
            log.debug("output of pod %s: %s", self.pod, error)

    def _read(self) -> _Outcome:
        if self.stopped or (self.ended and self.spool.refusing(self.node)):
            return _Outcome.DONE
        last = self.ended
        cursor = self._cursor or self._start()
        try:
            copied = self._copy(cursor, follow=not last, final=last)
        except ApiException as error:
            # Gone: nothing more to copy. Refused by the node (unreachable, or a node that
            # serves no logs): its other pods wait for it to answer again.
            log.debug("output of pod %s: HTTP %s", self.pod, error.status)
            if error.status == 404 or last:
                return _Outcome.DONE
            self._failures += 1
            return _Outcome.REFUSED
        except CONNECTION_ENDED as error:
            log.debug("output of pod %s: %s", self.pod, error)
            self._last_tries += last
            if self.stopped or self._last_tries >= _LAST_TRIES:
                return _Outcome.DONE
            self._failures += 1
            return _Outcome.NOTHING
        if last:
            return _Outcome.DONE
        # The stream ended: the container stopped (the watch says so soon) or the connection
        # broke. Either way, read again after a pause that grows while nothing comes.
        self._failures = 0 if copied else self._failures + 1
        return _Outcome.COPIED if copied else _Outcome.NOTHING

    def _start(self) -> Cursor:
        private_dir(self._directory.parent)
        private_dir(self._directory)
        cursor = _read_cursor(self._directory)
        if cursor.pod != self.pod:  # a new pod: its lines follow the earlier pod's
            cursor = Cursor(pod=self.pod, size=output_size(self._directory), attempt=self.attempt)
            _write_cursor(self._directory, cursor)
        self._cursor = cursor
        return cursor

    def _copy(self, cursor: Cursor, follow: bool, final: bool) -> bool:
        """One read of the pod log from the cursor on; whether it brought anything new.
        ``final``: the pod has ended and this read brings the last of its output."""
        query: dict[str, Any] = {"container": self.container, "timestamps": "true"}
        if follow:
            query["follow"] = "true"
        if cursor.at >= 0:  # the lines copied from then on are skipped below
            since = datetime.fromtimestamp(cursor.at // _SECOND, tz=UTC)
            query["sinceTime"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        response = self.spool.stream(self.pod, query)
        self.spool.served(self.node)
        self.response = response
        if self.stopped:
            shutdown(response)
        copied = False
        try:
            with _Appender(self._directory, cursor, self.spool.cap) as out:
                for lines in _lines(response):
                    self._last_line = time.monotonic()
                    for line, whole in lines:
                        at, text = _stamped(line, out.at)
                        if not out.fresh(at):
                            continue
                        if not whole and not final:
                            break  # a line cut by a broken stream: read again, whole, on resume
                        out.write(at, text + (b"\n" if whole else b""))
                        copied = True
                    out.flush()  # what one network read brought, in one append
                out.finish(final=final)
        finally:
            self.response = None
            response.release_conn()
        return copied


class _Appender:
    """Appends lines to the output after the cursor's size and advances the cursor, holding
    back a results line until a line follows it (then it was not the last). Lines are
    gathered and appended a read at a time (:meth:`flush`): the cursor moves with what is
    appended, never ahead of it.

    The cursor's second trails the last line's by one, so a line of the other stream stamped
    a little earlier than the last one but not yet copied is read again, and counted: the
    lines a resume brings are those stamped from that second on, in the log's order, and the
    copied ones come first among them whatever their times."""

    def __init__(self, directory: Path, cursor: Cursor, cap: int) -> None:
        self._directory = directory
        self._cursor = cursor
        self._cap = cap
        self._from = (cursor.at, cursor.seen)  # where this read resumes
        self._skipped = 0
        self._held: tuple[int, bytes] | None = None
        self._pending: list[bytes] = []  # lines not appended yet
        #: The times of the lines copied from the cursor's second on, in the log's order (the
        #: two streams' times cross by far less than the second the cursor trails by).
        self._times: deque[int] = deque()
        self.at = cursor.at  # the time of the last line copied
        self._saved = time.monotonic()

    def __enter__(self) -> _Appender:
        cut_output(self._directory, self._cursor.size)  # what came after the cursor is redone
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.flush()
        finally:
            _write_cursor(self._directory, self._cursor)

    def fresh(self, at: int) -> bool:
        """Whether a line stamped ``at`` is new: past the lines stamped from where this read
        resumes that were copied before."""
        since, seen = self._from
        if at < since:
            return False
        self._skipped += 1
        if self._skipped > seen:
            return True
        self._times.append(at)
        return False

    def write(self, at: int, line: bytes) -> None:
        if self._held is not None:
            self._put(*self._held)
            self._held = None
        if line.startswith(_MARKER):
            self._held = (at, line)
        else:
            self._put(at, line)

    def _put(self, at: int, line: bytes) -> None:
        self._pending.append(line)
        self._times.append(at)
        self.at = at

    def flush(self) -> None:
        """Append the lines gathered (readers see them now) and advance the cursor past them;
        a long follow records its place every :data:`_SAVE_EVERY` seconds."""
        if not self._pending:
            return
        data = b"".join(self._pending)
        append_output(self._directory, data, self._cap)
        self._pending.clear()
        cursor = self._cursor
        since = max(cursor.at, (self.at // _SECOND - 1) * _SECOND)
        while self._times and self._times[0] < since:
            self._times.popleft()
        cursor.at, cursor.seen, cursor.size = since, len(self._times), cursor.size + len(data)
        if time.monotonic() - self._saved > _SAVE_EVERY:
            _write_cursor(self._directory, cursor)
            self._saved = time.monotonic()

    def finish(self, final: bool) -> None:
        """At the end of the pod's output, a held results line was its last: keep it apart."""
        if self._held is None or not final:
            return
        report = self._held[1][len(_MARKER) :].strip()
        _atomic_write(self._directory / RESULTS, report)
        self._held = None


def _stamped(line: bytes, previous: int) -> tuple[int, bytes]:
    """A log line's time and text. A line without a time (the kubelet stamps each one) is taken
    as written when the one before it was."""
    stamp, _, text = line.partition(b" ")
    try:
        return stamp_ns(stamp.decode("ascii")), text
    except ValueError:
        return previous, line


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[list[tuple[bytes, bool]]]:
    """The response's lines without their ends, each with whether it was whole, a read's at a
    time as they arrive (``read1``: ``stream`` would wait for a full buffer on an unchunked
    response)."""
    pending = b""
    while chunk := response.read1(65536):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        if complete:
            yield [(line, True) for line in complete]
    if pending:
        yield [(pending, False)]


def _read_cursor(directory: Path) -> Cursor:
    """The cursor kept in ``directory``; a new one where there is none. A run whose pod is
    followed for the first time has no directory yet: one ``stat`` tells, where the failed
    open it saves costs four times as much (every run's first pod passes here)."""
    if not os.path.isdir(directory):
        return Cursor()
    try:
        return Cursor(**json.loads((directory / CURSOR).read_bytes()))
    except (OSError, ValueError, TypeError):
        return Cursor()


def _write_cursor(directory: Path, cursor: Cursor) -> None:
    _atomic_write(directory / CURSOR, json.dumps(asdict(cursor)).encode())


def _atomic_write(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    os.replace(partial, path)


def _close_output(directory: Path, cap: int) -> None:
    """Close a pod's copied output (:func:`finish_output`); a failure (a full disk) is logged,
    not raised: the pod's end is reported all the same, its output left as it was."""
    try:
        finish_output(directory, cap)
    except OSError as error:
        log.warning("closing the output in %s: %s", directory, error)

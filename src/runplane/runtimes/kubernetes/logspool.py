"""Each run's output, copied from the kubelet as its pod writes it, into the run's directory.

The pod log API serves a pod's output only while the pod and its node exist, and reads it from
the start or from a point in time. So runplane follows the log of each started pod of its runs
(``follow=true``, every line stamped with its time) and appends the lines to the run's
``output.log`` (:mod:`runplane.runtimes.output`): offsets into it stay valid, a finished run's
output outlives its pod and node, and ``runplane logs -f`` reads a file instead of the pod log
from its start. A dropped stream resumes from the last copied line's time (``sinceTime``),
skipping the lines already copied. How far the copy got is kept beside the file
(``output.cursor``), so a restarted service resumes where the last one stopped, and never
copies a line twice: the file is cut back to the size the cursor recorded.

The last line a pod prints may be the results the bootstrap could not fit in the termination
message (:data:`runplane.bootstrap.RESULTS_MARKER`); it goes to ``results.json`` instead of
the output.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from runplane.bootstrap import RESULTS_MARKER
from runplane.runtimes.kubernetes.api.backoff import Backoff
from runplane.runtimes.kubernetes.api.rest import CONNECTION_ENDED, RestApi, pods_path, shutdown
from runplane.runtimes.output import OUTPUT, private_dir, read_output

log = logging.getLogger(__name__)

CURSOR = "output.cursor"
RESULTS = "results.json"
_MARKER = RESULTS_MARKER.encode()
#: Reads of a finished pod's last output that may fail on a broken connection before giving up.
_LAST_TRIES = 3
#: How often (seconds) a copy that goes on records how far it got.
_SAVE_EVERY = 1.0
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


@dataclass
class Cursor:
    """How far the copy of a run's output got."""

    pod: str = ""  # the pod being copied (a retried run has one per attempt)
    at: int = -1  # the time of its last copied line, in ns since the epoch
    seen: int = 0  # how many copied lines have exactly that time (a resume sees them again)
    size: int = 0  # the output file's size after them
    complete: bool = False  # the pod has ended and all of its output is copied


def stamp_ns(stamp: str) -> int:
    """The kubelet's RFC 3339 line time in ns, exact (a float would lose the nanoseconds)."""
    match = _STAMP.fullmatch(stamp)
    if match is None:
        raise ValueError(f"not an RFC 3339 time: {stamp!r}")
    whole, fraction, zone = match.groups()
    seconds = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone)).timestamp()
    return int(seconds) * 1_000_000_000 + int((fraction or "0").ljust(9, "0"))


class LogSpool:
    """Copies the output of the pods it is told about into ``<runs>/<uid>/output.log``.

    Thread-safe: the watch thread starts and finishes copies, API threads read.
    """

    def __init__(
        self,
        rest: RestApi,
        namespace: str,
        runs: Path,
        *,
        idle_timeout: float = 60.0,
        drain_timeout: float = 10.0,
    ) -> None:
        self._rest = rest
        self._namespace = namespace
        self._runs = runs
        self.idle_timeout = idle_timeout
        self._drain_timeout = drain_timeout
        self._lock = threading.Lock()
        self._copies: dict[str, _Copy] = {}
        self._closed = False

    def follow(self, uid: str, pod: str, container: str = "main") -> None:
        """Copy ``pod``'s output as it is written (its container has started)."""
        self._copy_of(uid, pod, container)

    def finish(self, uid: str, pod: str, container: str = "main") -> None:
        """``pod`` has ended: copy the rest of its output, waiting a little for it, so that the
        run is reported ended with its whole output in place."""
        copy = self._copy_of(uid, pod, container)
        if copy is not None:
            copy.ended.set()
            copy.join(self._drain_timeout)

    def _copy_of(self, uid: str, pod: str, container: str) -> _Copy | None:
        with self._lock:
            if self._closed:
                return None
            copy = self._copies.get(uid)
            if copy is not None and copy.pod == pod and copy.is_alive():
                return copy
            directory = self._runs / uid
            if _read_cursor(directory).pod == pod and _read_cursor(directory).complete:
                return None
            if copy is not None:  # an earlier attempt's pod, which has ended
                copy.stop()
                copy.join(self._drain_timeout)
            copy = self._copies[uid] = _Copy(self, uid, pod, container)
            copy.start()
            return copy

    def _done(self, copy: _Copy) -> None:
        with self._lock:
            if self._copies.get(copy.uid) is copy:
                del self._copies[copy.uid]

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
        for copy in copies:
            copy.stop()
        for copy in copies:
            copy.join(2.0)

    def stream(self, pod: str, query: dict[str, Any]) -> urllib3.BaseHTTPResponse:
        timeout = (10.0, self.idle_timeout)
        return self._rest.stream(pods_path(self._namespace, pod) + "/log", query, timeout=timeout)


class _Copy(threading.Thread):
    """One pod's output into its run's file: follow the log, resume it after a break, and
    once the pod has ended read what is left."""

    def __init__(self, spool: LogSpool, uid: str, pod: str, container: str = "main") -> None:
        super().__init__(name=f"runplane-logs-{uid[:12]}", daemon=True)
        self.spool = spool
        self.uid = uid
        self.pod = pod
        self.container = container
        self.ended = threading.Event()  # the pod has ended: read the rest, then stop
        self._stopped = threading.Event()
        self._response: urllib3.BaseHTTPResponse | None = None
        self._lock = threading.Lock()
        self._backoff = Backoff(initial=0.2, maximum=5.0)
        self._directory = spool._runs / uid

    def stop(self) -> None:
        with self._lock:
            self._stopped.set()
            self.ended.set()  # wakes a back-off wait
            if self._response is not None:
                shutdown(self._response)

    def run(self) -> None:
        try:
            self._copy_all()
        except Exception:  # a copy's failure must not end the watch thread's work
            log.exception("copying the output of pod %s failed", self.pod)
        finally:
            self.spool._done(self)

    def _copy_all(self) -> None:
        private_dir(self._directory.parent)
        private_dir(self._directory)
        cursor = _read_cursor(self._directory)
        if cursor.pod != self.pod:  # a new pod: its lines follow the earlier pod's
            cursor = Cursor(pod=self.pod, size=_size(self._directory / OUTPUT))
            _write_cursor(self._directory, cursor)
        failures = 0
        while not self._stopped.is_set():
            last = self.ended.is_set()
            try:
                copied = self._copy(cursor, follow=not last)
            except ApiException as error:
                # Gone, or served by no kubelet (its node is unreachable, or a kwok node):
                # there is no more to copy, or none to have before the pod ends.
                log.debug("output of pod %s: HTTP %s", self.pod, error.status)
                if error.status == 404 or last:
                    return
                copied = False
            except CONNECTION_ENDED as error:
                log.debug("output of pod %s: %s", self.pod, error)
                if self._stopped.is_set() or (last and failures >= _LAST_TRIES):
                    return
                copied = False
            else:
                if last:
                    cursor.complete = True
                    _write_cursor(self._directory, cursor)
                    return
            # The stream ended: the container stopped (the watch says so soon) or the
            # connection broke. Either way, resume after a pause that grows while nothing comes.
            failures = 0 if copied else failures + 1
            self.ended.wait(self._backoff.delay(failures))

    def _copy(self, cursor: Cursor, follow: bool) -> bool:
        """One read of the pod log from the cursor on; whether it brought anything new."""
        query: dict[str, Any] = {"container": self.container, "timestamps": "true"}
        if follow:
            query["follow"] = "true"
        if cursor.at >= 0:  # whole seconds: the lines of that second are skipped below
            since = datetime.fromtimestamp(cursor.at // 1_000_000_000, tz=UTC)
            query["sinceTime"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        response = self.spool.stream(self.pod, query)
        with self._lock:
            if self._stopped.is_set():
                shutdown(response)
            self._response = response
        copied = False
        try:
            with _Appender(self._directory, cursor) as out:
                for line, whole in _lines(response):
                    at, text = _stamped(line, cursor.at)
                    if not out.fresh(at):
                        continue
                    if not whole and follow:
                        break  # a line cut by a broken stream: read again, whole, on resume
                    out.write(at, text + (b"\n" if whole else b""))
                    copied = True
                out.finish(final=not follow)
        finally:
            with self._lock:
                self._response = None
            response.release_conn()
        return copied


class _Appender:
    """Appends lines to the output after the cursor's size and advances the cursor, holding
    back a results line until a line follows it (then it was not the last)."""

    def __init__(self, directory: Path, cursor: Cursor) -> None:
        self._directory = directory
        self._cursor = cursor
        self._from = (cursor.at, cursor.seen)  # where this read resumes
        self._skipped = 0
        self._held: tuple[int, bytes] | None = None
        self._saved = time.monotonic()

    def __enter__(self) -> _Appender:
        fd = os.open(
            self._directory / OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        os.ftruncate(fd, self._cursor.size)  # a line written after the last cursor is redone
        os.lseek(fd, self._cursor.size, os.SEEK_SET)
        self._file = os.fdopen(fd, "wb", buffering=0)  # readers see each line as it comes
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()
        _write_cursor(self._directory, self._cursor)

    def fresh(self, at: int) -> bool:
        """Whether a line stamped ``at`` is new: later than where this read resumes, or at
        that very time but past the lines copied with it before."""
        since, seen = self._from
        if at != since:
            return at > since
        self._skipped += 1
        return self._skipped > seen

    def write(self, at: int, line: bytes) -> None:
        if self._held is not None:
            self._put(*self._held)
            self._held = None
        if line.startswith(_MARKER):
            self._held = (at, line)
        else:
            self._put(at, line)

    def _put(self, at: int, line: bytes) -> None:
        self._file.write(line)
        cursor = self._cursor
        cursor.seen = cursor.seen + 1 if at == cursor.at else 1
        cursor.at = at
        cursor.size += len(line)
        if time.monotonic() - self._saved > _SAVE_EVERY:  # a long follow keeps its place too
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


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[tuple[bytes, bool]]:
    """The response's lines without their ends, each with whether it was whole, as they
    arrive (``read1``: ``stream`` would wait for a full buffer on an unchunked response)."""
    pending = b""
    while chunk := response.read1(65536):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line, True
    if pending:
        yield pending, False


def _read_cursor(directory: Path) -> Cursor:
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


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0

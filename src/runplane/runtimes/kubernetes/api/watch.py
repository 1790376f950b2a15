"""List-then-watch over a namespace's pods: the informer loop the runtime's events come from.

A small, kopf-like building block, written against the raw API rather than the client's
``watch.Watch`` helper because the loop must own four things that helper hides:

* **Resume, not re-list.** Every event (and every ``BOOKMARK``, requested with
  ``allowWatchBookmarks``) advances the last seen ``resourceVersion``; after a disconnect, a
  server-side timeout or an idle read timeout the watch reopens from it, so nothing is missed
  and nothing is replayed.
* **410 Gone.** When the server no longer has history that old (etcd compacted, watch cache
  rotated), either as an HTTP 410 or as an ``ERROR`` event with code 410, the loop re-lists.
  The re-list is diffed against what it knew: new pods come out as ``ADDED``, changed ones as
  ``MODIFIED`` and pods that vanished during the gap as ``VANISHED`` with their last known
  state (their final state is unknown: they may have finished before they went).
* **Back-off.** Any other failure (apiserver down, 5xx, 429, RBAC) waits with capped,
  jittered exponential back-off and keeps the ``resourceVersion``; a working stream resets it.
* **Clean stop.** ``stop()`` closes the open response from the caller's thread, so the loop
  does not sit in a blocking read until the next event.

What it knows of each object (as last seen) can be read from any thread, all of it or, with an
``index``, the objects of one key (client-go's indexer): a caller that needs one run's pods
reads them here, in memory, instead of listing them from the API server, which filters every
pod of the namespace to answer a label selector.

Objects are passed on as the plain JSON dicts the API sends (no model deserialisation), as the
handler's readers want them: all of each object, or what a caller's :class:`Views` decode of it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from runplane import meters
from runplane.runtimes.kubernetes.api.backoff import Backoff
from runplane.runtimes.kubernetes.api.rest import (
    CONNECTION_ENDED,
    Decode,
    Requests,
    pods_path,
    shutdown,
    whole,
)

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
#: A pod missing from a re-list: deleted while we were not watching, final state unknown (what
#: client-go calls ``DeletedFinalStateUnknown``). The object is the last state we saw.
VANISHED = "VANISHED"
GONE = 410

#: Called once per pod change, from the watch thread: (event type, pod as a JSON dict).
Handler = Callable[[str, dict[str, Any]], None]


class Expired(Exception):
    """The server has no history back to our resourceVersion: only a re-list helps."""


@dataclass(slots=True)
class WatchStats:
    """Counters for logs, metrics and tests: how often the loop listed, watched and failed."""

    lists: int = 0
    watches: int = 0
    expired: int = 0
    errors: int = 0
    bookmarks: int = 0
    events: int = 0


@dataclass(frozen=True)
class Views:
    """How the loop decodes what it reads into plain JSON dicts: a watch event (one line:
    ``{"type", "object"}``) and a page of a list (``{"metadata", "items"}``). Each object
    whole unless a caller decodes only the fields its readers use."""

    event: Decode = field(default=whole)
    page: Decode = field(default=whole)


def _uid(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


#: Objects per page of a list. What a page held whole beyond what is kept of each object is
#: freed once the next page is read, and the allocator keeps those blocks for good: with 500
#: pods a page, a restarted service held 25 MiB more at 3,000 live pods than the one before it;
#: with 100, as much (a list request per 100 pods instead of per 500).
PAGE_SIZE = 100

#: A read that took longer than this (seconds) waited for its event to come; a read of one
#: that had come takes microseconds.
_WAITED = 0.001


class PodWatch:
    """Keeps ``handler`` told about every pod matching ``label_selector`` in ``namespace``.

    ``resource_version`` resumes from a version saved earlier instead of listing first; if the
    server has forgotten it, the loop falls back to a list (and counts an ``expired``).
    """

    def __init__(
        self,
        rest: Requests,
        namespace: str,
        label_selector: str,
        handler: Handler,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        idle_timeout: float = 90.0,
        page_size: int = PAGE_SIZE,
        backoff: Backoff | None = None,
        name: str = "runplane-pod-watch",
        path: str | None = None,
        keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        index: Callable[[dict[str, Any]], str] | None = None,
        views: Views | None = None,
        pace: float = 0.0,
    ) -> None:
        self._rest = rest
        self.namespace = namespace
        #: What is listed and watched: the namespace's pods unless told otherwise (the node
        #: watch gives ``/api/v1/nodes``); the loop is the same for any kind.
        self.path = path or pods_path(namespace)
        self.label_selector = label_selector
        self._handler = handler
        self._version = resource_version
        self._timeout_seconds = timeout_seconds
        self._idle_timeout = idle_timeout
        self._page_size = page_size
        self._backoff = backoff or Backoff()
        self._known: dict[str, dict[str, Any]] = {}
        #: What is kept of each object between events (all of it unless told).
        self._keep = keep
        self._views = views or Views()
        #: While events come closer together than this (seconds), they are read together, at
        #: most once per ``pace``: see :meth:`_gather`.
        self._pace = pace
        #: The last time a read had to wait for an event.
        self._woken = 0.0
        #: The key each object is found by in :meth:`known_by` (none unless told), and the
        #: objects by key, then uid: changed by the loop's thread under ``_indexing``.
        self._index = index
        self._indexed: dict[str, dict[str, dict[str, Any]]] = {}
        self._indexing = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._lock = threading.Lock()
        self._response: urllib3.BaseHTTPResponse | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: Why the last request failed, until one succeeds again.
        self._failing: str | None = None
        self.stats = WatchStats()
        self._meter = (("watch", name.removeprefix("runplane-").removesuffix("-watch")),)

    # -- control --------------------------------------------------------------------------

    @property
    def resource_version(self) -> str | None:
        """The last version seen; save it to resume a later watch without a re-list."""
        return self._version

    def start(self) -> PodWatch:
        self._thread.start()
        return self

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once the handler has heard of every pod that existed when the loop began."""
        return self._synced.wait(timeout)

    def interrupt(self) -> None:
        """Drop the open connection as a network failure would; the loop resumes from the
        last resourceVersion."""
        with self._lock:
            response = self._response
        if response is not None:
            shutdown(response)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.interrupt()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def trouble(self) -> str | None:
        """Why this watch does not see changes now, in words; ``None`` while it does."""
        if not self.running:
            return f"the watch of {self.path} is not running"
        if not self._synced.is_set():
            failing = f" ({self._failing})" if self._failing else ""
            return f"the watch of {self.path} has not listed it yet{failing}"
        if self._failing:
            return f"the watch of {self.path} is failing: {self._failing}"
        return None

    def known(self) -> list[dict[str, Any]]:
        """Every object the loop knows of now, as last seen (a copy; any thread)."""
        return list(dict(self._known).values())

    def get(self, uid: str) -> dict[str, Any] | None:
        """The object of ``uid`` as last seen, if known (any thread; read it, never change it)."""
        return self._known.get(uid)

    def known_by(self, key: str) -> list[dict[str, Any]]:
        """The objects whose ``index`` key is ``key``, as last seen (any thread; the objects
        are the loop's own: read them, never change them)."""
        with self._indexing:
            return list(self._indexed.get(key, {}).values())

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if self._version is None:
                    self._relist()
                    self._synced.set()
                if self._watch():
                    failures = 0
                elif not self._stop.is_set():
                    # Closed at once with nothing said: a proxy or apiserver in trouble.
                    failures += 1
                    self._stop.wait(self._backoff.delay(failures))
            except Expired as gone:
                self.stats.expired += 1
                log.info("pod watch: %s; re-listing", gone)
                self._version = None
            except Exception as error:
                if self._stop.is_set():
                    break
                failures += 1
                self.stats.errors += 1
                self._failing = _describe(error)
                delay = self._backoff.delay(failures)
                log.warning("pod watch failed (%s); retrying in %.1fs", _describe(error), delay)
                self._stop.wait(delay)

    def _list_pages(self) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            query = {
                "labelSelector": self.label_selector,
                "limit": self._page_size or None,
                "continue": token,
            }
            try:
                page = self._rest.json(
                    "GET",
                    self.path,
                    query,
                    timeout=(10, max(self._idle_timeout, 30)),
                    decode=self._views.page,
                )
            except ApiException as error:
                if error.status == GONE and token:
                    raise Expired("the list's continue token expired") from error
                raise
            yield page
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return

    def _relist(self) -> None:
        self.stats.lists += 1
        seen: dict[str, dict[str, Any]] = {}
        version = ""
        for page in self._list_pages():
            version = _version(page) or version
            for pod in page.get("items") or []:
                # Kept as the loop keeps it, and without its managed fields now, not once
                # dispatched: a re-list of 10,000 pods held whole took 300 MiB the allocator
                # never gave back, and their managed fields alone (a million empty dicts at
                # 3,000 pods) still left 70 MiB of freed blocks behind.
                _unmanaged(pod)
                seen[_uid(pod)] = pod if self._keep is None else self._keep(pod)
        gone = [pod for uid, pod in self._known.items() if uid not in seen]
        for pod in gone:
            self._dispatch(VANISHED, pod)
        for uid, pod in seen.items():
            previous = self._known.get(uid)
            if previous is None:
                self._dispatch(ADDED, pod)
            elif _version(previous) != _version(pod):
                self._dispatch(MODIFIED, pod)
        self._version = version

    def _watch(self) -> bool:
        """One watch request; False if it ended at once having delivered nothing."""
        self.stats.watches += 1
        began = time.monotonic()
        try:
            response = self._rest.stream(
                self.path,
                {
                    "labelSelector": self.label_selector,
                    "watch": "true",
                    "allowWatchBookmarks": "true",
                    "resourceVersion": self._version,
                    "timeoutSeconds": self._timeout_seconds,
                },
                timeout=(10, self._idle_timeout),
            )
        except ApiException as error:
            if error.status == GONE:
                raise Expired(f"HTTP 410 {error.reason}") from error
            raise
        self._synced.set()
        self._failing = None
        with self._lock:
            self._response = response
        if self._stop.is_set():
            shutdown(response)
        delivered = False
        try:
            asked = time.monotonic()
            for line in lines(response):
                if self._pace:
                    self._gather(asked)
                if self._stop.is_set():
                    break
                self._receive(self._views.event(line))
                delivered = True
                asked = time.monotonic()
        except CONNECTION_ENDED:
            # A read timeout, a dropped connection, or our own interrupt()/stop() closing the
            # socket under the read: all resume from the last version.
            if not self._stop.is_set():
                log.debug("pod watch connection ended; resuming at %s", self._version)
        finally:
            with self._lock:
                self._response = None
            response.release_conn()
        return delivered or time.monotonic() - began > 1.0

    def _gather(self, asked: float) -> None:
        """Pause after a read that waited for its event (asked for at ``asked``) less than
        ``pace`` after the last that waited, until ``pace`` has passed since it: the events
        of that time gather in the socket, and are then read one after the other without a
        wait. A busy watch (a burst of submissions: three or four events a run) thus wakes
        twice per ``pace`` instead of at every event, each wake a thread switch and a hand
        of the interpreter's lock; a quiet one reads each event at once."""
        now = time.monotonic()
        if now - asked < _WAITED:
            return  # read from what had gathered
        if now - self._woken < self._pace:
            self._stop.wait(self._pace - (now - self._woken))
            now = time.monotonic()
        self._woken = now

    def _receive(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            text = f"{obj.get('reason', '')}: {obj.get('message', '')}"
            if code == GONE:
                raise Expired(text)
            raise ApiException(status=code, reason=text)
        version = _version(obj)
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
        elif kind in (ADDED, MODIFIED, DELETED):
            self._dispatch(kind, obj)
        if version:
            self._version = version

    def _dispatch(self, kind: str, pod: dict[str, Any]) -> None:
        _unmanaged(pod)
        uid = _uid(pod)
        if kind in (DELETED, VANISHED):
            previous = self._known.pop(uid, None)
            kept = None
        else:
            previous = self._known.get(uid)
            kept = self._known[uid] = pod if self._keep is None else self._keep(pod)
        if self._index is not None:
            self._reindex(self._index, uid, previous, kept)
        self.stats.events += 1
        meters.count("kube_watch_events", self._meter)
        try:
            self._handler(kind, pod)
        except Exception:  # a consumer's bug must not stop the watch for every other run
            log.exception("pod watch handler failed on %s %s", kind, uid)

    def _reindex(
        self,
        index: Callable[[dict[str, Any]], str],
        uid: str,
        previous: dict[str, Any] | None,
        kept: dict[str, Any] | None,
    ) -> None:
        """Move ``uid`` from its previous object's key to its new one's (``None``: gone)."""
        with self._indexing:
            if previous is not None:
                key = index(previous)
                same = self._indexed.get(key)
                if same is not None:
                    same.pop(uid, None)
                    if not same:
                        del self._indexed[key]
            if kept is not None:
                self._indexed.setdefault(index(kept), {})[uid] = kept


def _unmanaged(obj: dict[str, Any]) -> None:
    """Drop who wrote which field: a third of a pod's size, and nothing here reads it."""
    (obj.get("metadata") or {}).pop("managedFields", None)


def lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Complete lines of a streamed watch response, however the chunks split them."""
    pending = b""
    for chunk in response.stream(65536, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _describe(error: BaseException) -> str:
    if isinstance(error, ApiException):
        return f"HTTP {error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"

"""Leader election on a ``coordination.k8s.io/v1`` Lease, as Kubernetes' own controllers hold
one (client-go's ``leaderelection``).

A candidate reads the Lease every ``retry_period``. It takes it when nobody holds it (no Lease,
an empty ``holderIdentity``), or when the record it last saw has not changed for the record's
``leaseDurationSeconds`` as measured on this candidate's own clock from when it saw it: clocks
of two machines are never compared, only a record's changes are timed. Every write replaces
the object at the ``resourceVersion`` read, so of two candidates racing for an expired Lease
the API server lets one win and answers the other ``409``.

The leader renews (``renewTime``) every ``retry_period``, and stops leading once it could not
renew for ``renew_deadline`` seconds, timed from when it sent the last renewal that succeeded.
Each request is given at most ``lease_duration - renew_deadline`` seconds, so a leader has
stopped before any other candidate can see its Lease expire. On a clean stop it releases the
Lease (an empty holder), and the next candidate takes it at its next read.

The Python ``kubernetes`` client has a ``leaderelection`` package with a Lease lock, but it
cannot be used as a part of a service: it calls ``sys.exit`` on a bad configuration, waits in
loops nothing can stop, never releases the Lease, uses the process-wide default client rather
than the one given, and writes times as local wall-clock text (docs/decisions.md).
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from runplane.runtimes.kubernetes.api.rest import Requests

log = logging.getLogger(__name__)

_API = "/apis/coordination.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class Timing:
    """The three durations of leader election, in seconds (``lease_duration`` >
    ``renew_deadline`` > ``retry_period``, checked by the settings)."""

    lease_duration: int = 8
    renew_deadline: float = 5.0
    retry_period: float = 1.0

    @property
    def request_timeout(self) -> float:
        """What one request may take: a leader then stops before a follower can take over."""
        return min(self.lease_duration - self.renew_deadline, 2 * self.retry_period)


def micro_time(at: float) -> str:
    """A Kubernetes ``MicroTime``: UTC, microseconds, ``Z``."""
    moment = datetime.datetime.fromtimestamp(at, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(spec: dict[str, Any]) -> tuple[object, ...]:
    """What of a Lease's spec tells whether its holder is alive: any change is a renewal."""
    keys = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime")
    return (*(spec.get(key) for key in keys), spec.get("leaseTransitions"))


class LeaseElector:
    """One candidate for the Lease ``namespace/name``, named ``identity``."""

    def __init__(
        self,
        api: Requests,
        namespace: str,
        name: str,
        identity: str,
        timing: Timing,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.namespace, self.name, self.identity = namespace, name, identity
        self.timing = timing
        self._clock, self._wall = clock, wall
        self._collection = f"{_API}/namespaces/{namespace}/leases"
        self._path = f"{self._collection}/{name}"
        #: The record last read or written, and when (this machine's clock) it changed.
        self._observed: tuple[object, ...] | None = None
        self._observed_at = 0.0
        #: When the last acquisition or renewal that succeeded was sent.
        self._renewed_at: float | None = None

    # -- one try ----------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One read and, when the Lease is free, expired or ours, one write; whether this
        candidate holds the Lease now."""
        sent = self._clock()
        now = micro_time(self._wall())
        timeout = self.timing.request_timeout
        try:
            lease = self.api.json("GET", self._path, timeout=timeout)
        except ApiException as error:
            if error.status != 404:
                log.info("lease %s/%s not read: %s", self.namespace, self.name, error.reason)
                return False
            return self._create(now, sent, timeout)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            log.info("lease %s/%s not read: %s", self.namespace, self.name, error)
            return False
        spec = dict(lease.get("spec") or {})
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        ours = holder == self.identity
        if holder and not ours:
            duration = spec.get("leaseDurationSeconds") or self.timing.lease_duration
            if self._clock() < self._observed_at + float(duration):
                return False  # another's, renewed within its duration as far as we saw
        transitions = int(spec.get("leaseTransitions") or 0)
        lease["spec"] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.timing.lease_duration,
            "acquireTime": spec.get("acquireTime") if ours else now,
            "renewTime": now,
            "leaseTransitions": transitions if ours else transitions + 1,
        }
        if not self._write("PUT", self._path, lease, timeout):
            return False
        if not ours:
            log.info("lease %s/%s acquired by %s", self.namespace, self.name, self.identity)
        self._observe(lease["spec"])
        self._renewed_at = sent
        return True

    def _create(self, now: str, sent: float, timeout: float) -> bool:
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.timing.lease_duration,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
        if not self._write("POST", self._collection, body, timeout):
            return False
        log.info("lease %s/%s created by %s", self.namespace, self.name, self.identity)
        self._observe(spec)
        self._renewed_at = sent
        return True

    def _write(self, method: str, path: str, body: dict[str, Any], timeout: float) -> bool:
        """A create or a replace at the version read; ``False`` when another won (409) or the
        request failed."""
        try:
            self.api.json(method, path, body=body, timeout=timeout)
            return True
        except ApiException as error:
            if error.status != 409:
                log.info("lease %s/%s not written: %s", self.namespace, self.name, error.reason)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            log.info("lease %s/%s not written: %s", self.namespace, self.name, error)
        return False

    @property
    def holder(self) -> str:
        """Who held the Lease when it was last read or written (``""``: nobody, or unread)."""
        return str(self._observed[0] or "") if self._observed else ""

    def _observe(self, spec: dict[str, Any]) -> None:
        record = _record(spec)
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()

    # -- the loops ----------------------------------------------------------------------------

    def acquire(self, stop: threading.Event) -> bool:
        """Try every ``retry_period`` until this candidate holds the Lease (``True``) or
        ``stop`` is set (``False``)."""
        while not stop.is_set():
            if self.try_acquire_or_renew():
                return True
            stop.wait(self.timing.retry_period)
        return False

    def renew(self, stop: threading.Event) -> bool:
        """Renew every ``retry_period`` while leading; ``False`` as soon as no renewal has
        succeeded for ``renew_deadline`` seconds or another holds the Lease (leadership is
        lost: stop controlling),
        ``True`` when ``stop`` is set first (then :meth:`release`)."""
        while not stop.wait(self.timing.retry_period):
            if self.try_acquire_or_renew():
                continue
            if self.holder not in ("", self.identity):
                log.warning(
                    "lease %s/%s: held by %s now; %s stops leading",
                    self.namespace,
                    self.name,
                    self.holder,
                    self.identity,
                )
                return False
            if self.expired():
                log.warning(
                    "lease %s/%s: not renewed for %.1f s; %s stops leading",
                    self.namespace,
                    self.name,
                    self.timing.renew_deadline,
                    self.identity,
                )
                return False
        return True

    def expired(self) -> bool:
        """Whether the last renewal that succeeded is older than ``renew_deadline``."""
        if self._renewed_at is None:
            return True
        return self._clock() - self._renewed_at > self.timing.renew_deadline

    def release(self) -> bool:
        """Give the Lease up if this candidate holds it (an empty holder, as client-go
        writes), so another takes it at its next read; whether it was released."""
        timeout = self.timing.request_timeout
        try:
            lease = self.api.json("GET", self._path, timeout=timeout)
        except (ApiException, urllib3.exceptions.HTTPError, OSError):
            return False
        spec = dict(lease.get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            return False
        now = micro_time(self._wall())
        lease["spec"] = {
            **spec,
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
        }
        released = self._write("PUT", self._path, lease, timeout)
        if released:
            self._renewed_at = None
            log.info("lease %s/%s released by %s", self.namespace, self.name, self.identity)
        return released

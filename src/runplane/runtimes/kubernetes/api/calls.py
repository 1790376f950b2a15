"""Requests to the API server within one namespace: retried where a repeat is harmless, with
one timeout, refusals in runplane's error hierarchy."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar, Unpack

import urllib3
from kubernetes.client.exceptions import ApiException

from runplane.errors import RunplaneError
from runplane.runtimes.kubernetes.api.backoff import Backoff
from runplane.runtimes.kubernetes.api.rest import Options, Query, RestApi

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Answers worth retrying: the request may not have been applied, and trying again is safe.
TRANSIENT = frozenset({429, 500, 502, 503, 504})
#: How long (seconds) what an API group serves is taken as known.
DISCOVERY_TTL = 60.0


class ClusterError(RunplaneError):
    """The cluster refused or failed a request (RBAC, quota, admission, unreachable);
    ``status`` is the API server's answer (403: this service may not), ``None`` if none came."""

    http_status = 502

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def api_message(error: ApiException) -> str:
    """The API server's own words for a refusal."""
    try:
        body = json.loads(error.body or "")
        return str(body.get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)


class Calls:
    """Requests within one namespace, each with the same timeout and retry budget."""

    def __init__(
        self, rest: RestApi, namespace: str, timeout: float = 30.0, attempts: int = 4
    ) -> None:
        self.rest = rest
        self.namespace = namespace
        self.timeout = timeout
        self._attempts = max(attempts, 1)
        self._backoff = Backoff(initial=0.2, maximum=5.0)
        #: What each API group version served when last asked, and when that was.
        self._discovered: dict[str, tuple[float, frozenset[str]]] = {}

    def retried(self, what: str, request: Callable[[], T]) -> T:
        """Run ``request``, retrying answers that may not have been applied.

        Only requests whose repetition is harmless come here: creates of deterministic names
        (a repeat answers 409) and reads. Refusals stay ``ApiException`` for the caller to
        read their status.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                return request()
            except ApiException as error:
                if error.status not in TRANSIENT or attempt >= self._attempts:
                    raise
                cause = f"HTTP {error.status}"
            except (urllib3.exceptions.HTTPError, OSError) as error:
                if attempt >= self._attempts:
                    raise ClusterError(f"kubernetes: {what}: {error}") from None
                cause = type(error).__name__
            delay = self._backoff.delay(attempt)
            log.info("%s: %s; retrying in %.1fs", what, cause, delay)
            time.sleep(delay)

    def checked(self, what: str, request: Callable[[], T]) -> T:
        """:meth:`retried`, with the API's refusals as :class:`ClusterError`."""
        try:
            return self.retried(what, request)
        except ApiException as error:
            raise self.refused(what, error) from None

    def refused(self, what: str, error: ApiException) -> ClusterError:
        return ClusterError(
            f"kubernetes: {what} in {self.namespace}: HTTP {error.status}: {api_message(error)}",
            error.status,
        )

    def json(
        self, method: str, path: str, query: Query = None, **options: Unpack[Options]
    ) -> dict[str, Any]:
        """One request, answered as JSON, within this namespace's timeout unless told another."""
        options.setdefault("timeout", self.timeout)
        return self.rest.json(method, path, query, **options)

    def unread(
        self, method: str, path: str, query: Query = None, **options: Unpack[Options]
    ) -> None:
        """One request whose answer matters by its status only (a change, a create whose
        caller keeps what it sent), within this namespace's timeout unless told another: the
        answer, often the whole object, is not decoded."""
        options.setdefault("timeout", self.timeout)
        self.rest.unread(method, path, query, **options)

    def read(self, what: str, path: str, query: Query = None) -> dict[str, Any]:
        """A GET, retried; refusals as :class:`ClusterError`."""
        return self.checked(what, lambda: self.json("GET", path, query))

    def create(
        self, what: str, path: str, body: Mapping[str, Any], answer: bool = True
    ) -> dict[str, Any] | None:
        """A POST of an object with a deterministic name, retried: the object as the server
        has it, or with ``answer=False`` as it was sent (the server's copy is not decoded, for
        a caller that needs no more than its name); ``None`` where one of that name exists
        already (409), for the caller to judge. Other refusals stay ``ApiException``."""
        try:
            if not answer:
                return self.retried(what, lambda: self._created_unread(path, body))
            return self.retried(what, lambda: self.json("POST", path, body=body))
        except ApiException as error:
            if error.status == 409:
                return None
            raise

    def _created_unread(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.unread("POST", path, body=body)
        return dict(body)

    def change(
        self,
        what: str,
        method: str,
        path: str,
        missing: Collection[int] = (404,),
        **options: Unpack[Options],
    ) -> bool:
        """A change (a patch, a delete) sent once; ``False`` where the answer's status is in
        ``missing`` (the object is gone, or no longer the one meant); other refusals as
        :class:`ClusterError`."""
        try:
            self.unread(method, path, **options)
        except ApiException as error:
            if error.status in missing:
                return False
            raise self.refused(what, error) from None
        return True

    def serves(self, api_version: str, plural: str, fresh: bool = False) -> bool:
        """Whether the API server serves ``plural`` in ``api_version`` (API discovery, asked
        again after :data:`DISCOVERY_TTL`, or now when ``fresh``: an operator installed later
        is found then)."""
        known = self._discovered.get(api_version)
        if fresh or known is None or time.monotonic() - known[0] > DISCOVERY_TTL:
            known = self._discovered[api_version] = (time.monotonic(), self._discover(api_version))
        return plural in known[1]

    def note_served(self, api_version: str, plural: str) -> None:
        """An object of ``plural`` was just created: the group serves it, whatever discovery
        said before (its CRD was installed since)."""
        at, served = self._discovered.get(api_version, (time.monotonic(), frozenset()))
        self._discovered[api_version] = (at, served | {plural})

    def _discover(self, api_version: str) -> frozenset[str]:
        try:
            found = self.json("GET", f"/apis/{api_version}")
        except ApiException as error:
            if error.status in (403, 404):
                return frozenset()
            raise self.refused(f"discovering {api_version}", error) from None
        return frozenset(str(r.get("name")) for r in found.get("resources") or [])

"""The runtime's requests to the API server: retried where a repeat is harmless, refusals in
runplane's error hierarchy."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from runplane.errors import RunplaneError
from runplane.runtimes.kubernetes.rest import RestApi
from runplane.runtimes.kubernetes.watch import Backoff

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Answers worth retrying: the request may not have been applied, and trying again is safe.
TRANSIENT = frozenset({429, 500, 502, 503, 504})


class ClusterError(RunplaneError):
    """The cluster refused or failed a request (RBAC, quota, admission, unreachable)."""

    http_status = 502


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
            f"kubernetes: {what} in {self.namespace}: HTTP {error.status}: {api_message(error)}"
        )

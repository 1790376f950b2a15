"""The namespace runplane works in is there before anything goes into it: read, or created and
ready for pods, or a refusal to start that says what is missing."""

from __future__ import annotations

import logging
import time

from kubernetes.client.exceptions import ApiException

from runplane.errors import ConfigError
from runplane.runtimes.kubernetes.api.calls import Calls, api_message

log = logging.getLogger(__name__)


def ensure_namespace(calls: Calls) -> None:
    """The calls' namespace exists, or is created now; when it may not be, the service
    refuses to start, saying what is missing (a run submitted into a missing namespace could
    only fail)."""
    path = f"/api/v1/namespaces/{calls.namespace}"
    try:
        calls.retried(f"reading namespace {calls.namespace}", lambda: calls.json("GET", path))
        return
    except ApiException as error:
        if error.status != 404:
            raise _unusable(calls.namespace, error) from None
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": calls.namespace}}
    try:
        # None: another service created it meanwhile.
        if (
            calls.create(f"creating namespace {calls.namespace}", "/api/v1/namespaces", body)
            is not None
        ):
            log.info("created namespace %s", calls.namespace)
    except ApiException as error:
        raise _unusable(calls.namespace, error) from None
    _await_default_account(calls)


def _await_default_account(calls: Calls, timeout: float = 30.0) -> None:
    """A new namespace takes pods once its ``default`` ServiceAccount exists (the API server
    refuses them before); wait for it, so the first run does not fail for that."""
    path = f"/api/v1/namespaces/{calls.namespace}/serviceaccounts/default"
    deadline = time.monotonic() + timeout
    while True:
        try:
            calls.unread("GET", path)
            return
        except ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                return  # not ours to read, or slow: the first run says so if it matters
        time.sleep(0.1)


def _unusable(namespace: str, error: ApiException) -> ConfigError:
    return ConfigError(
        f"namespace: runplane runs pods in namespace {namespace!r}, which it cannot use: HTTP "
        f"{error.status}: {api_message(error)}; create it (kubectl create namespace "
        f"{namespace}) or let runplane's account create namespaces, or set RUNPLANE_NAMESPACE "
        "to one it may use"
    )

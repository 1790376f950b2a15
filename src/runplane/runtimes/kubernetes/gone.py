"""Awaiting that pods are really gone after their owner is deleted.

Deleting a Deployment (or any owner) returns at once: the garbage collector removes its pods
afterwards, and each pod then stops within its grace period. Until then its containers run and
its requests hold room on its node, so "removed" would be a claim, not a fact. This watches the
pods of a label selector from a listing's resource version until none is left, at most
``timeout`` seconds, and says which were still there at that bound.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from runplane.runtimes.kubernetes.api.calls import Calls
from runplane.runtimes.kubernetes.api.rest import collection_path
from runplane.runtimes.kubernetes.api.watch import lines

log = logging.getLogger(__name__)

#: Seconds one watch request lasts before it is made again (the server ends it then).
_WATCH_SECONDS = 10


def await_pods_gone(calls: Calls, selector: str, timeout: float) -> list[str]:
    """Wait until no pod of ``selector`` exists in the namespace, at most ``timeout`` seconds;
    the names of those still there at the bound (none when all went)."""
    path = collection_path("v1", "Pod", calls.namespace)
    deadline = time.monotonic() + timeout
    while True:
        listed = calls.read("listing the pods being removed", path, {"labelSelector": selector})
        left = {str(p["metadata"]["name"]) for p in listed.get("items") or []}
        if not left:
            return []
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return sorted(left)
        version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        seconds = max(1, min(_WATCH_SECONDS, int(remaining) + 1))
        query: dict[str, Any] = {
            "labelSelector": selector,
            "watch": "true",
            "resourceVersion": version,
            "timeoutSeconds": seconds,
            "allowWatchBookmarks": "false",
        }
        try:
            response = calls.rest.stream(path, query, timeout=(10.0, seconds + 10.0))
            try:
                for line in lines(response):
                    event = orjson.loads(line)
                    if event.get("type") == "ERROR":  # too old a version: list again
                        break
                    if event.get("type") == "DELETED":
                        left.discard(str(event["object"]["metadata"]["name"]))
                    if not left or time.monotonic() > deadline:
                        break
            finally:
                response.release_conn()
        except Exception as error:  # a dropped watch: the next listing says where things are
            log.info("watching pods %s being removed: %s", selector, error)
        if not left:
            return []

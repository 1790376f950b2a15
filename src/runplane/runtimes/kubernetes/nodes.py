"""The cluster's nodes as a watch reports them: each node's group and whether it is spot, and
the news that one is gone, so runs on it are reported lost at once; and an admin's change to a
node's labels.

A deleted Node is how a cloud reports a reclaimed spot instance or a scaled-down machine; its
pods are collected by the cluster only after a fixed quarantine (PodGC: 40 s and more), far
later than a run waiting to be retried should wait. A node that merely stops reporting
(``NotReady``) is not taken as lost: its pods may still run behind a network partition, and a
retry would run the handler twice; the cluster's own eviction reports them (``Preempted``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from runplane import names
from runplane.config import PreemptibleNodes
from runplane.errors import NotFoundError, PolicyError
from runplane.runtimes.kubernetes.api.calls import Calls, ClusterError, api_message
from runplane.runtimes.kubernetes.api.rest import MERGE_PATCH
from runplane.runtimes.kubernetes.api.watch import DELETED, VANISHED
from runplane.spec.labels import check_dns_subdomain

#: Called with the name of a node that was deleted, its group and whether it was spot, from
#: the node watch's thread.
NodeLost = Callable[[str, str, bool | None], None]


class NodeBook:
    """Thread-safe: the node watch observes; event publishers ask :meth:`describe`."""

    def __init__(self, spot: PreemptibleNodes, lost: NodeLost) -> None:
        self._spot = spot
        self._lost = lost
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[str, bool]] = {}

    def observe(self, kind: str, node: dict[str, Any]) -> None:
        """A :class:`~runplane.runtimes.kubernetes.api.watch.PodWatch` handler for Nodes."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        if not name:
            return
        if kind in (DELETED, VANISHED):
            with self._lock:
                group, spot = self._nodes.pop(name, ("", None))
            self._lost(name, group, spot)
            return
        labels = meta.get("labels") or {}
        spot = any(labels.get(key) == value for key, value in self._spot.node_selector.items())
        with self._lock:
            self._nodes[name] = (str(labels.get(names.NODE_GROUP, "")), spot)

    def describe(self, name: str) -> tuple[str, bool | None]:
        """The node's group and whether it is spot; ``("", None)`` for a node not known."""
        with self._lock:
            group, spot = self._nodes.get(name, ("", None))
        return group, spot


def label_node(calls: Calls, name: str, change: Mapping[str, str | None]) -> dict[str, str]:
    """Merge-patch the Node's ``metadata.labels`` (``null`` removes a key; a repeat changes
    nothing, so it is retried like a read); the Node's labels after.

    The service account needs ``patch`` on ``nodes`` (cluster-scoped): a refusal says so.
    """
    check_dns_subdomain("node", name, "'worker-1'")
    what = f"labelling node {name}"
    patch = {"metadata": {"labels": dict(change)}}
    try:
        node = calls.retried(
            what,
            lambda: calls.json(
                "PATCH", f"/api/v1/nodes/{name}", body=patch, content_type=MERGE_PATCH
            ),
        )
    except ApiException as error:
        if error.status == 404:
            raise NotFoundError(f"node {name!r}: the cluster has no such node") from None
        if error.status == 403:
            raise PolicyError(
                "node",
                f"the cluster refused {what} ({api_message(error)}); the service account "
                "needs the verb patch on nodes (a ClusterRole, see docs/service.md, RBAC)",
            ) from None
        message = f"kubernetes: {what}: HTTP {error.status}: {api_message(error)}"
        raise ClusterError(message) from None
    return dict((node.get("metadata") or {}).get("labels") or {})

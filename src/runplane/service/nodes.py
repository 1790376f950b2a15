"""Changing a node's labels through the runtime, the same for ``runplane serve`` (an admin's to
do) and for the embedded default (this machine's user's)."""

from __future__ import annotations

from collections.abc import Mapping

from runplane.errors import InvalidValueError
from runplane.runtimes.contract import Runtime


def label_node(runtime: Runtime, name: str, labels: Mapping[str, str | None]) -> dict[str, str]:
    """Set the node's labels in ``labels`` and remove those given ``None``: the Node object on
    a cluster, this machine's stored labels on the embedded default; the labels after."""
    if not runtime.capabilities.node_labels:
        raise InvalidValueError(
            "node",
            name,
            f"the {runtime.name} runtime's node labels come from its configuration only",
            "local.node_labels in the service's configuration",
        )
    return runtime.label_node(name, labels)

"""What runplane reads of the objects it watches, decoded from the API's JSON without the rest.

A pod event is about 7 KB of JSON: its managed fields (who wrote which field, 40 % of it),
its volumes, its containers' environment (a run's invocation) and mounts, none of which the
watch's readers look at. Decoding all of it into dicts, three events a run, was a third of
the pod watch's time. msgspec decodes into the shapes below (plain dicts, as before) and
skips every other field as it scans, without making an object of it: a pod event in about
a third of the time, and each object the watch holds is as small as what it keeps.

The shapes name every field the watch's readers use (:mod:`.pod_events`, :mod:`.tracker`,
:mod:`.runtime`, :mod:`.autoresize`, :mod:`.logspool`, :mod:`.gang`, :mod:`.nodes`,
:mod:`.kueue_admission`); a reader that needs another field must add it here. Leaves are
typed ``Any``, so no value the API sends can make an event fail to decode: only the shape
that leads to the fields read is checked. A status is kept whole (it is small, and
everything in it is read). An ``ERROR`` event's object is a ``Status``, not the watched
kind: such an event is decoded again, whole.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import msgspec
import orjson

from runplane.runtimes.kubernetes.api.watch import Views


class Metadata(TypedDict, total=False):
    """An object's metadata, all of it but its managed fields."""

    name: Any
    generateName: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    generation: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    deletionGracePeriodSeconds: Any
    labels: Any
    annotations: Any
    ownerReferences: Any
    finalizers: Any


class Container(TypedDict, total=False):
    name: Any
    resources: Any


class PodSpec(TypedDict, total=False):
    nodeName: Any
    schedulingGates: Any
    containers: list[Container] | None


class Pod(TypedDict, total=False):
    metadata: Metadata | None
    spec: PodSpec | None
    status: Any


class NodeMetadata(TypedDict, total=False):
    """What the node book reads of a node, and what tells whether it changed: a node's
    status (its conditions' heartbeats, capacity, images) is most of each node event."""

    name: Any
    uid: Any
    resourceVersion: Any
    labels: Any


class Node(TypedDict, total=False):
    metadata: NodeMetadata | None


#: A list's metadata ("continue" is a keyword: the field is named in the functional form).
_ListMeta = TypedDict("_ListMeta", {"resourceVersion": Any, "continue": Any}, total=False)


class _PodList(TypedDict, total=False):
    metadata: _ListMeta | None
    items: list[Pod] | None


class _NodeList(TypedDict, total=False):
    metadata: _ListMeta | None
    items: list[Node] | None


class _PodEvent(TypedDict):
    type: str
    object: Pod


class _NodeEvent(TypedDict):
    type: str
    object: Node


def _views(event_of: type[Any], page: type[Any]) -> Views:
    events = msgspec.json.Decoder(event_of)
    pages = msgspec.json.Decoder(page)

    def event(line: bytes) -> dict[str, Any]:
        found = cast(dict[str, Any], events.decode(line))
        # An error's object is a Status, whose fields the watch reads: rare, decoded whole.
        return cast(dict[str, Any], orjson.loads(line)) if found["type"] == "ERROR" else found

    def listed(body: bytes) -> dict[str, Any]:
        return cast(dict[str, Any], pages.decode(body))

    return Views(event=event, page=listed)


#: How the pod watch reads pods, and the node watch nodes.
PODS = _views(_PodEvent, _PodList)
NODES = _views(_NodeEvent, _NodeList)

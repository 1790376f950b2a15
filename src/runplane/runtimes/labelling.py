"""A change to a node's labels, checked once for every runtime: keys and values by the API
server's rules, ``None`` to remove a key, and the keys that belong to Kubernetes itself left
alone.

Labels under ``kubernetes.io/`` and ``k8s.io/`` (``kubernetes.io/hostname``, ``.../arch``) are
written by the kubelet and read by the scheduler; an admin changing them would move pods that
pin a host, so they are refused. ``node-role.kubernetes.io/`` and other subdomains stay open:
they are how clusters name their node pools.
"""

from __future__ import annotations

from collections.abc import Mapping

from runplane.errors import InvalidValueError
from runplane.spec.labels import check_label_key, check_label_value

#: The most labels one change may set or remove (a node carries a few dozen at most).
MAX_CHANGES = 64
#: Label prefixes that belong to Kubernetes and the kubelet.
RESERVED_PREFIXES = ("kubernetes.io/", "k8s.io/")
EXAMPLE = "{'runplane.io/pool': 'training', 'old-label': None}"


def check_label_change(field: str, labels: object) -> dict[str, str | None]:
    """``labels`` as ``{key: value}``, with ``None`` for a key to remove; a fresh dict."""
    if not isinstance(labels, Mapping) or not labels:
        raise InvalidValueError(
            field, labels, "a mapping of label keys to values (null removes the label)", EXAMPLE
        )
    if len(labels) > MAX_CHANGES:
        raise InvalidValueError(
            field, f"{len(labels)} labels", f"at most {MAX_CHANGES} labels in one change", EXAMPLE
        )
    checked: dict[str, str | None] = {}
    for key, value in labels.items():
        check_label_key(f"{field} key", key)
        if key.startswith(RESERVED_PREFIXES):
            raise InvalidValueError(
                f"{field} key",
                key,
                "labels under kubernetes.io/ and k8s.io/ are set by Kubernetes itself; use a "
                "prefix of your own",
                "'runplane.io/pool'",
            )
        checked[key] = None if value is None else check_label_value(f"{field}[{key!r}]", value)
    return checked


def relabelled(labels: Mapping[str, str], change: Mapping[str, str | None]) -> dict[str, str]:
    """``labels`` after ``change``: set what has a value, remove what has ``None``."""
    result = dict(labels)
    for key, value in change.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result

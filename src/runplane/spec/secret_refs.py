"""Every Kubernetes Secret a function references, and the field that references it.

A run that references a Secret reads it: on a cluster the kubelet hands it to the pod, on
this machine the local secret store does. A shared service therefore checks each reference
against what the caller's token grants before a run starts; this module finds them all. A
function has two places for them, ``env`` (``valueFrom.secretKeyRef``; an ``envFrom`` entry
is refused by validation) and ``volumes``, where every volume shape that names a Secret is
read (``secret``, ``projected`` sources, the ``secretRef`` of flexVolume and other drivers),
including shapes validation refuses today, so one accepted later is not missed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runplane.spec.function import Function

#: Keys of a volume source that hold a ``{name: <secret>}`` reference (flexVolume, CSI, and the
#: in-tree drivers that take credentials).
_SECRET_REF_KEYS = ("secretRef", "nodePublishSecretRef")


def env_secret_refs(field: str, env: Sequence[Any]) -> Iterator[tuple[str, str]]:
    """``valueFrom.secretKeyRef`` of an ``env`` list."""
    for index, item in enumerate(env):
        ref = _get(item, "valueFrom", "secretKeyRef")
        if isinstance(ref, dict) and ref.get("name"):
            yield f"{field}[{index}].valueFrom.secretKeyRef.name", str(ref["name"])


def volume_secret_refs(field: str, volumes: Sequence[Any]) -> Iterator[tuple[str, str]]:
    """Secret volumes, projected volumes' secret sources, and the credentials of volume
    drivers (``flexVolume.secretRef`` and the like)."""
    for index, volume in enumerate(volumes):
        if not isinstance(volume, dict):
            continue
        where = f"{field}[{index}]"
        for kind, source in volume.items():
            if not isinstance(source, dict):
                continue
            if kind == "secret" and source.get("secretName"):
                yield f"{where}.secret.secretName", str(source["secretName"])
            elif kind == "projected":
                for number, projection in enumerate(source.get("sources") or []):
                    ref = _get(projection, "secret")
                    if isinstance(ref, dict) and ref.get("name"):
                        yield (
                            f"{where}.projected.sources[{number}].secret.name",
                            str(ref["name"]),
                        )
            elif kind == "azureFile" and source.get("secretName"):
                yield f"{where}.azureFile.secretName", str(source["secretName"])
            for key in _SECRET_REF_KEYS:
                ref = source.get(key)
                if isinstance(ref, dict) and ref.get("name"):
                    yield f"{where}.{kind}.{key}.name", str(ref["name"])


def secret_references(fn: Function) -> list[tuple[str, str]]:
    """``(field, secret name)`` for every Secret ``fn`` references, in spec order."""
    spec = fn.spec
    return [
        *env_secret_refs("spec.env", spec.env),
        *volume_secret_refs("spec.volumes", spec.volumes),
    ]


def _get(item: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(item, dict):
            return None
        item = item.get(key)
    return item

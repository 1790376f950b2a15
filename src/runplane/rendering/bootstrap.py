"""runplane's bootstrap (:mod:`runplane.bootstrap`) as a pod receives it: a ConfigMap of its
modules, one key each, and the volume that lays them out as the package its command runs.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from runplane import bootstrap, names


@cache
def _modules() -> dict[str, str]:
    """The package's modules by file name, the keys of its ConfigMap."""
    folder = Path(bootstrap.__file__).parent
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.py"))}


@cache
def bootstrap_configmap_name() -> str:
    """The bootstrap's ConfigMap, named by its content: a service of another runplane version
    in the same namespace uses its own, and the object can be immutable."""
    digest = hashlib.sha256(json.dumps(_modules(), sort_keys=True).encode()).hexdigest()[:12]
    return f"{names.BOOTSTRAP_VOLUME}-{digest}"


def bootstrap_configmap(namespace: str) -> dict[str, Any]:
    """The ConfigMap holding the program every run's pod starts, one key per module."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bootstrap_configmap_name(),
            "namespace": namespace,
            "labels": {names.MANAGED_BY: names.MANAGER},
        },
        "immutable": True,
        "data": dict(_modules()),
    }


def bootstrap_volume() -> dict[str, Any]:
    """The ConfigMap as a folder (mounted at :data:`names.BOOTSTRAP_DIR`): the script the
    container runs at its top, the package's modules in the folder named as the package is
    imported in a pod; the script puts its own folder first on ``sys.path`` to find them."""
    items = [dict(item) for item in _items()]  # each pod gets its own: manifests are mutable
    return {
        "name": names.BOOTSTRAP_VOLUME,
        "configMap": {"name": bootstrap_configmap_name(), "items": items},
    }


@cache
def _items() -> tuple[dict[str, str], ...]:
    return tuple(
        {
            "key": key,
            "path": key if key == names.BOOTSTRAP_SCRIPT else f"{bootstrap.SHIPPED_AS}/{key}",
        }
        for key in _modules()
    )

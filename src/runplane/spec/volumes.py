"""Volumes a function mounts: PVC, ConfigMap, Secret and V3IO, applied with ``fn.apply(...)``.

Each ``mount_*`` returns a modifier (a callable taking the function), as in the documents.
Volumes and mounts are stored in the Kubernetes shape. Re-applying the same mount is a no-op
(notebook cells get re-run); a different volume under a taken name or path is an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from runplane import names
from runplane.errors import ConflictError, InvalidValueError
from runplane.spec.base import to_kubernetes_json
from runplane.spec.bounds import MAX_ITEMS, MAX_PATH_LENGTH
from runplane.spec.labels import check_dns_label, check_dns_subdomain

if TYPE_CHECKING:
    from runplane.spec.function import Function

Modifier = Callable[["Function"], "Function"]
Volume = dict[str, Any]
Mount = dict[str, Any]

#: The FlexVolume driver of the V3IO FUSE mount.
V3IO_DRIVER = "v3io/fuse"
#: Secret holding the V3IO access key when the user names neither a key nor a secret.
V3IO_DEFAULT_SECRET = "v3io-access"
#: The key inside that Secret which the V3IO driver reads.
V3IO_SECRET_KEY = "accessKey"


class VolumeMount(NamedTuple):
    """A path inside the container and the sub-path of the volume mounted there."""

    path: str
    sub_path: str = ""


def check_mount_path(field: str, path: object) -> str:
    """An absolute path inside the container, with no ``..`` element (Kubernetes' own rule),
    outside runplane's own directory."""
    if isinstance(path, str) and (path == names.OWN_DIR or path.startswith(f"{names.OWN_DIR}/")):
        raise InvalidValueError(
            field,
            path,
            f"{names.OWN_DIR} is runplane's own directory in a run's container",
            "'/data'",
        )
    if (
        not isinstance(path, str)
        or not path.startswith("/")
        or ":" in path
        or ".." in path.split("/")
        or "\x00" in path
        or len(path) > MAX_PATH_LENGTH
    ):
        raise InvalidValueError(
            field,
            path,
            "a mount path is absolute, with no ':' and no '..' element (MLRun passes a relative "
            "one on to the cluster unchecked; runplane refuses it so that the volume is where "
            "the code looks: give the absolute path the container sees)",
            "'/data'",
        )
    return path.rstrip("/") or "/"


def check_relative_path(field: str, path: object, example: str = "'train'") -> str:
    """A path inside a volume or a directory: relative, and never leaving it (no ``..``)."""
    if (
        not isinstance(path, str)
        or path.startswith("/")
        or ".." in path.split("/")
        or "\x00" in path
        or len(path) > MAX_PATH_LENGTH
    ):
        raise InvalidValueError(
            field, path, "a relative path with no '..' element (it stays inside)", example
        )
    return path


#: The volume sources runplane mounts, with the name each one refers to, and the fields that
#: may accompany it.
_SOURCES: dict[str, tuple[str, frozenset[str]]] = {
    "persistentVolumeClaim": ("claimName", frozenset({"readOnly"})),
    "configMap": ("name", frozenset({"items", "defaultMode", "optional"})),
    "secret": ("secretName", frozenset({"items", "defaultMode", "optional"})),
    "flexVolume": ("driver", frozenset({"secretRef", "options", "readOnly", "fsType"})),
    "emptyDir": ("", frozenset({"medium", "sizeLimit"})),
}


def check_volumes(field: str, volumes: object) -> list[Volume]:
    """Volumes in Kubernetes shape, of the kinds runplane mounts, naming nothing outside.
    Kubernetes client objects (``V1Volume``) are accepted and kept as plain dicts."""
    volumes = to_kubernetes_json(volumes)
    if not isinstance(volumes, list) or len(volumes) > MAX_ITEMS:
        raise InvalidValueError(
            field,
            volumes,
            f"volumes are a list (at most {MAX_ITEMS}) of {{name, <source>}}",
            "[{'name': 'data', 'persistentVolumeClaim': {'claimName': 'data-claim'}}]",
        )
    for index, volume in enumerate(volumes):
        where = f"{field}[{index}]"
        kinds = [key for key in volume if key in _SOURCES] if isinstance(volume, dict) else []
        if not isinstance(volume, dict) or len(kinds) != 1 or set(volume) != {"name", *kinds}:
            raise InvalidValueError(
                where,
                volume,
                "a volume has a name and one source: " + ", ".join(_SOURCES),
                "{'name': 'data', 'persistentVolumeClaim': {'claimName': 'data-claim'}}",
            )
        check_dns_label(f"{where}.name", volume["name"], "'data'")
        _not_runplanes(f"{where}.name", volume["name"])
        kind = kinds[0]
        source = volume[kind]
        named, optional = _SOURCES[kind]
        if not isinstance(source, dict) or set(source) - {named, *optional} - {""}:
            raise InvalidValueError(
                f"{where}.{kind}",
                source,
                f"{kind} has {', '.join(sorted({named, *optional} - {''}))}",
                "{'claimName': 'data-claim'}" if kind == "persistentVolumeClaim" else "{}",
            )
        if named and kind != "flexVolume":
            check_dns_subdomain(f"{where}.{kind}.{named}", source.get(named), "'data-claim'")
        if kind == "flexVolume":
            secret = (source.get("secretRef") or {}).get("name", "")
            if secret:
                check_dns_subdomain(f"{where}.flexVolume.secretRef.name", secret, "'v3io-access'")
        for item_index, item in enumerate(source.get("items") or []):
            if not isinstance(item, dict) or not item.get("key"):
                raise InvalidValueError(
                    f"{where}.{kind}.items[{item_index}]",
                    item,
                    "an item maps a key to a path",
                    "{'key': 'config.yaml', 'path': 'config.yaml'}",
                )
            check_key(f"{where}.{kind}.items[{item_index}].key", item["key"])
            check_relative_path(f"{where}.{kind}.items[{item_index}].path", item.get("path"))
    return volumes


def _not_runplanes(field: str, name: str) -> None:
    if name.startswith(names.OWN):
        raise InvalidValueError(
            field, name, f"volume names starting {names.OWN!r} are runplane's own", "'data'"
        )


def check_volume_mounts(field: str, mounts: object) -> list[Mount]:
    """Mounts in Kubernetes shape: a volume name, an absolute mount path, a relative sub-path.
    Kubernetes client objects (``V1VolumeMount``) and snake_case keys (``mount_path``) are
    accepted and kept as the API's camelCase dicts."""
    converted = to_kubernetes_json(mounts)
    if isinstance(converted, list):
        mounts = [_camel_mount(mount) for mount in converted]
    if not isinstance(mounts, list) or len(mounts) > MAX_ITEMS:
        raise InvalidValueError(
            field,
            mounts,
            f"mounts are a list (at most {MAX_ITEMS}) of {{name, mountPath}}",
            "[{'name': 'data', 'mountPath': '/data'}]",
        )
    for index, mount in enumerate(mounts):
        where = f"{field}[{index}]"
        if not isinstance(mount, dict) or set(mount) - {"name", "mountPath", "subPath", "readOnly"}:
            raise InvalidValueError(
                where,
                mount,
                "a mount has name, mountPath, and optionally subPath and readOnly",
                "{'name': 'data', 'mountPath': '/data'}",
            )
        check_dns_label(f"{where}.name", mount.get("name"), "'data'")
        check_mount_path(f"{where}.mountPath", mount.get("mountPath"))
        if "subPath" in mount:
            check_relative_path(f"{where}.subPath", mount["subPath"], "'users/alice'")
    return mounts


def check_key(field: str, key: object) -> str:
    """A ConfigMap or Secret key: what Kubernetes allows, which is also a safe file name."""
    if not isinstance(key, str) or not _KEY.match(key) or key in (".", ".."):
        raise InvalidValueError(
            field, key, "a key is letters, digits, '-', '_' and '.', at most 253", "'token'"
        )
    return key


_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


def add_volume(
    volumes: list[Volume], mounts: list[Mount], volume: Volume, new_mounts: Sequence[Mount]
) -> tuple[list[Volume], list[Mount]]:
    """New lists with ``volume`` and its mounts added, refusing taken names and paths."""
    name = volume["name"]
    existing = next((v for v in volumes if v["name"] == name), None)
    if existing is not None and existing != volume:
        raise ConflictError(
            "volume_name",
            f"a different volume is already named {name!r}; volume names are unique "
            f"(example: volume_name='{name}-2')",
        )
    taken = {m["mountPath"]: m for m in mounts}
    added: list[Mount] = []
    for mount in new_mounts:
        other = taken.get(mount["mountPath"])
        if other == mount:
            continue
        if other is not None or any(m["mountPath"] == mount["mountPath"] for m in added):
            raise ConflictError(
                "volume_mount_path",
                f"{mount['mountPath']!r} is already a mount path"
                + (f" (of volume {other['name']!r})" if other else "")
                + "; mount paths are unique (example: volume_mount_path='/data2')",
            )
        added.append(mount)
    return (volumes if existing else [*volumes, volume]), [*mounts, *added]


def _modifier(volume: Volume, mounts: Sequence[Mount]) -> Modifier:
    def apply(function: Function) -> Function:
        function.add_volume(volume, mounts)
        return function

    return apply


def mount_pvc(
    pvc_name: str, volume_name: str = "pipeline", volume_mount_path: str = "/mnt/pipeline"
) -> Modifier:
    """Mount a PersistentVolumeClaim that exists in the cluster."""
    check_dns_subdomain("pvc_name", pvc_name, "'data-claim'")
    check_dns_label("volume_name", volume_name, "'data'")
    path = check_mount_path("volume_mount_path", volume_mount_path)
    return _modifier(
        {"name": volume_name, "persistentVolumeClaim": {"claimName": pvc_name}},
        [{"name": volume_name, "mountPath": path}],
    )


def auto_mount(
    pvc_name: str = "", volume_mount_path: str = "", volume_name: str | None = None
) -> Modifier:
    """The service's auto-mount (``auto_mount`` in the configuration), which every function
    gets unless it disables it: this modifier only turns it back on. With ``pvc_name`` it
    mounts that claim instead, at ``volume_mount_path`` (default ``/mnt/pipeline``)."""
    if pvc_name:
        return mount_pvc(pvc_name, volume_name or "pipeline", volume_mount_path or "/mnt/pipeline")

    def enable(function: Function) -> Function:
        function.spec.disable_auto_mount = False
        return function

    return enable


def _items(field: str, items: Any) -> list[dict[str, str]] | None:
    if items is None:
        return None
    if isinstance(items, dict):
        items = [{"key": key, "path": path} for key, path in items.items()]
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and i.get("key") and i.get("path") for i in items
    ):
        raise InvalidValueError(
            field,
            items,
            "items map keys to file paths",
            "[{'key': 'config.yaml', 'path': 'config.yaml'}]",
        )
    for index, item in enumerate(items):
        check_key(f"{field}[{index}].key", item["key"])
        check_relative_path(f"{field}[{index}].path", item["path"], "'config.yaml'")
    return items


def mount_configmap(
    configmap_name: str, mount_path: str, volume_name: str = "configmap", items: Any = None
) -> Modifier:
    """Mount a ConfigMap's keys as files."""
    check_dns_subdomain("configmap_name", configmap_name, "'app-config'")
    check_dns_label("volume_name", volume_name, "'config'")
    return _keys_as_files("configMap", {"name": configmap_name}, mount_path, volume_name, items)


def mount_secret(
    secret_name: str, mount_path: str, volume_name: str = "secret", items: Any = None
) -> Modifier:
    """Mount a Secret's keys as files (the values never enter the function spec)."""
    check_dns_subdomain("secret_name", secret_name, "'db-credentials'")
    check_dns_label("volume_name", volume_name, "'secret'")
    return _keys_as_files("secret", {"secretName": secret_name}, mount_path, volume_name, items)


def _keys_as_files(
    kind: str, source: dict[str, Any], mount_path: str, volume_name: str, items: Any
) -> Modifier:
    """A ConfigMap's or Secret's volume (all keys, or the ``items`` chosen) and its mount."""
    if (checked := _items("items", items)) is not None:
        source = {**source, "items": checked}
    return _modifier(
        {"name": volume_name, kind: source},
        [{"name": volume_name, "mountPath": check_mount_path("mount_path", mount_path)}],
    )


def mount_v3io(
    name: str = "v3io",
    remote: str = "",
    access_key: str = "",
    user: str = "",
    secret: str | None = None,
    volume_mounts: Sequence[VolumeMount] | None = None,
) -> Modifier:
    """Mount V3IO containers through the FUSE FlexVolume driver.

    The access key always reaches the driver through a Secret (``secretRef``), never as a
    volume option: an inline ``access_key`` is held on the function outside its spec and
    rendered as a Secret of its own, so exports, logs and run records never contain it.
    """
    check_dns_label("name", name, "'v3io'")
    if remote and volume_mounts:
        raise ConflictError("remote", "give either remote or volume_mounts, not both")
    if access_key and secret:
        raise ConflictError("access_key", "give either access_key or secret, not both")
    if secret is not None:
        check_dns_subdomain("secret", secret, "'v3io-access'")
    if volume_mounts is None:
        if remote:
            volume_mounts = [VolumeMount("/v3io", remote)]
        else:
            volume_mounts = [VolumeMount("/v3io", "")]
            if user:
                volume_mounts.append(VolumeMount("/User", f"users/{user}"))
    mounts: list[Mount] = []
    for index, mount in enumerate(volume_mounts):
        path, sub_path = VolumeMount(*mount)
        item: Mount = {"name": name, "mountPath": check_mount_path(f"volume_mounts[{index}]", path)}
        if sub_path:
            item["subPath"] = check_relative_path(
                f"volume_mounts[{index}].sub_path", sub_path.strip("/"), "'users/alice'"
            )
        mounts.append(item)

    def apply(function: Function) -> Function:
        secret_name = secret or V3IO_DEFAULT_SECRET
        if access_key:
            secret_name = f"{function.metadata.name}-{name}-v3io"
        volume = {
            "name": name,
            "flexVolume": {"driver": V3IO_DRIVER, "secretRef": {"name": secret_name}},
        }
        function.add_volume(volume, mounts)
        if access_key:
            function.hold_secret(secret_name, {V3IO_SECRET_KEY: access_key})
        return function

    return apply


_MOUNT_KEYS = {"mount_path": "mountPath", "sub_path": "subPath", "read_only": "readOnly"}


def _camel_mount(mount: object) -> object:
    if not isinstance(mount, dict):
        return mount
    return {_MOUNT_KEYS.get(key, key): value for key, value in mount.items()}

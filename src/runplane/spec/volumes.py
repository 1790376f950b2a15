"""Volumes a function mounts: PVC, ConfigMap, Secret and V3IO, applied with ``fn.apply(...)``.

Each ``mount_*`` returns a modifier (a callable taking the function), as in the documents.
Volumes and mounts are stored in the Kubernetes shape. Re-applying the same mount is a no-op
(notebook cells get re-run); a different volume under a taken name or path is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from runplane.errors import ConflictError, InvalidValueError
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
    if not isinstance(path, str) or not path.startswith("/") or ":" in path:
        raise InvalidValueError(field, path, "a mount path is absolute and has no ':'", "'/data'")
    return path.rstrip("/") or "/"


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
    return items


def mount_configmap(
    configmap_name: str, mount_path: str, volume_name: str = "configmap", items: Any = None
) -> Modifier:
    """Mount a ConfigMap's keys as files."""
    check_dns_subdomain("configmap_name", configmap_name, "'app-config'")
    check_dns_label("volume_name", volume_name, "'config'")
    source: dict[str, Any] = {"name": configmap_name}
    if (checked := _items("items", items)) is not None:
        source["items"] = checked
    return _modifier(
        {"name": volume_name, "configMap": source},
        [{"name": volume_name, "mountPath": check_mount_path("mount_path", mount_path)}],
    )


def mount_secret(
    secret_name: str, mount_path: str, volume_name: str = "secret", items: Any = None
) -> Modifier:
    """Mount a Secret's keys as files (the values never enter the function spec)."""
    check_dns_subdomain("secret_name", secret_name, "'db-credentials'")
    check_dns_label("volume_name", volume_name, "'secret'")
    source: dict[str, Any] = {"secretName": secret_name}
    if (checked := _items("items", items)) is not None:
        source["items"] = checked
    return _modifier(
        {"name": volume_name, "secret": source},
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
            item["subPath"] = sub_path.strip("/")
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

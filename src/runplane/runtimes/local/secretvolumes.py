"""Secrets of the local store mounted as volumes: a run reads a copy of the keys its volume
grants, never the store.

The store (``<home>/secrets/<secret>/<key>``) is runplane's only (0700): it holds every Secret
on the machine, and a run as a user of its own must not read it. So as a run's process is about
to start, the keys its Secret volume grants (every key of the Secret, or only its ``items``,
each at the path it names) are copied into ``<run dir>/secrets/<volume>``: directories 0700 and
files 0400, all the run's user's, and the volume's mounts point there. The copy is removed as
the run ends; one that a runplane which died left behind is removed when its run's uid is next
leased (:meth:`~runplane.runtimes.local.users.RunUsers.lease`), before a run has that uid again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from runplane.errors import NotFoundError

#: The directory in a run's directory that holds the copies of its Secret volumes.
COPIES = "secrets"


@dataclass(frozen=True, slots=True)
class SecretVolume:
    """A Secret volume of a run: the Secret's folder in the store, and what of it is granted."""

    volume: str
    secret: str
    folder: Path
    #: (key, path in the volume) of each key its ``items`` grant; ``None``: every key.
    items: tuple[tuple[str, str], ...] | None
    optional: bool

    def files(self) -> list[tuple[str, str]]:
        """The keys to copy now and their paths; raises for a Secret or key the store lacks
        (unless the volume is ``optional``, as Kubernetes has it)."""
        if self.items is None:
            try:
                names = sorted(os.listdir(self.folder))
            except FileNotFoundError:
                if self.optional:
                    return []
                raise self._missing(None) from None
            return [(key, key) for key in names if _is_file(self.folder / key)]
        present = [(key, path) for key, path in self.items if _is_file(self.folder / key)]
        if len(present) < len(self.items) and not self.optional:
            key = next(key for key, _ in self.items if not _is_file(self.folder / key))
            raise self._missing(key)
        return present

    def _missing(self, key: str | None) -> NotFoundError:
        what = f"secret {self.secret!r}" + (f" key {key!r}" if key else "")
        where = self.folder / key if key else self.folder
        return NotFoundError(
            f"volume {self.volume!r}: {what} is not in the local secret store; create {where} "
            f"(the store is {self.folder.parent}/<secret>/<key>), or map {self.secret!r} in "
            "local.volumes"
        )


def planned(volume: Mapping[str, Any], store: Path) -> SecretVolume:
    """The Secret volume ``volume`` (a pod's, of the local store), checked against the store."""
    source = volume["secret"]
    items = source.get("items")
    secret = SecretVolume(
        volume=volume["name"],
        secret=source["secretName"],
        folder=store / source["secretName"],
        items=None
        if not items
        else tuple((item["key"], item.get("path") or item["key"]) for item in items),
        optional=bool(source.get("optional")),
    )
    secret.files()
    return secret


def directory(run_dir: Path, volume: str) -> Path:
    """Where the copy of a run's Secret volume is, which its mounts point at."""
    return run_dir / COPIES / volume


def copy(run_dir: Path, volumes: Sequence[SecretVolume]) -> list[Path]:
    """Copy what each volume grants into the run's directory, replacing an earlier attempt's
    copy; returns what was made, for its owner to be the run's user. Nothing runs as that user
    yet, so nothing can stand in the way (a link where a file is made)."""
    remove(run_dir)
    made: list[Path] = []
    if not volumes:
        return made
    top = run_dir / COPIES
    os.mkdir(top, 0o700)
    made.append(top)
    for volume in volumes:
        base = directory(run_dir, volume.volume)
        os.mkdir(base, 0o700)
        made.append(base)
        for key, path in volume.files():
            parts = PurePosixPath(path).parts
            if not parts or parts[0] == "/" or ".." in parts:
                raise NotFoundError(f"volume {volume.volume!r}: item path {path!r} leaves it")
            target = base
            for part in parts[:-1]:
                target = target / part
                if not target.is_dir():
                    os.mkdir(target, 0o700)
                    made.append(target)
            target = target / parts[-1]
            _write(target, _read(volume.folder / key))
            made.append(target)
    return made


def remove(run_dir: Path) -> None:
    """Remove the copies of a run's Secret volumes (what its user added there too)."""
    copies = run_dir / COPIES
    if copies.is_symlink():  # the run replaced it: the link goes, never what it points at
        copies.unlink()
        return
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(copies)  # never follows a link inside


def _is_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400)
    with os.fdopen(fd, "wb") as file:
        file.write(data)

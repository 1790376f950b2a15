"""Project secrets on this machine: the local secret store (``<home>/secrets/<name>/<key>``,
readable by its owner only), which runs here read ``secretKeyRef`` variables from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from runplane.config import current
from runplane.errors import InvalidValueError


def _store(name: str) -> Path:
    return current().local.home / "secrets" / name


def store_secrets(name: str, values: Mapping[str, str]) -> None:
    """Write ``values`` as the Secret ``name`` of this machine (other keys are kept)."""
    if current().api:
        raise InvalidValueError(
            "set_secrets",
            sorted(values),
            f"runs go to the runplane service at {current().api}, whose cluster keeps "
            f"secrets: create the Secret {name!r} there (kubectl create secret generic "
            f"{name} --from-literal=KEY=VALUE ...)",
        )
    folder = _store(name)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for key, value in values.items():
        path = folder / key
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as written:
            written.write(str(value))


def read_secret(name: str, key: str) -> str | None:
    path = _store(name) / key
    return path.read_text(encoding="utf-8") if path.is_file() else None

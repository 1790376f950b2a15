"""Service defaults an admin changes at run time, layered over the configuration."""

from __future__ import annotations

import time
from typing import Any

import pydantic
from sqlalchemy import Engine

from runplane.config import FunctionDefaults, Settings
from runplane.errors import InvalidValueError
from runplane.service.db import session_factory
from runplane.service.db.models import ServiceSetting

_KEY = "function_defaults"


def merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``patch`` laid over it, nested mappings merged key by key; a ``None``
    in the patch removes the key (JSON merge patch, RFC 7386)."""
    merged = dict(base)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def apply_overrides(settings: Settings, overrides: dict[str, Any]) -> Settings:
    """``settings`` with ``overrides`` merged into its function defaults, validated."""
    merged = merge(settings.function_defaults.model_dump(mode="json"), overrides)
    try:
        defaults = FunctionDefaults.model_validate(merged)
    except pydantic.ValidationError as error:
        first = error.errors(include_url=False)[0]
        field = "function_defaults." + ".".join(str(p) for p in first["loc"])
        raise InvalidValueError(field, first.get("input"), first["msg"]) from None
    return settings.model_copy(update={"function_defaults": defaults})


class DefaultsStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = session_factory(engine)

    def overrides(self) -> dict[str, Any]:
        with self._sessions() as session:
            row = session.get(ServiceSetting, _KEY)
            return dict(row.value) if row else {}

    def save(self, overrides: dict[str, Any], user: str) -> None:
        with self._sessions.begin() as session:
            row = session.get(ServiceSetting, _KEY)
            if row is None:
                session.add(
                    ServiceSetting(
                        key=_KEY, value=overrides, updated_at=time.time(), updated_by=user
                    )
                )
            else:
                row.value, row.updated_at, row.updated_by = overrides, time.time(), user

"""Service defaults and policies an admin changes at run time, layered over the
configuration.

The policies an admin may change are which of the configured priority classes users' functions
may use (and which roles may use each), and the reserved node groups. Classes can only be
narrowed to configured ones: on a cluster those are the PriorityClass objects that exist.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

import pydantic
from sqlalchemy import Engine

from runplane.config import FunctionDefaults, ReservedNodeGroup, Settings
from runplane.errors import InvalidValueError, PolicyError
from runplane.rendering.policy import check_priority_class
from runplane.service.db import session_factory
from runplane.service.db.models import ServiceSetting
from runplane.spec.labels import check_dns_label, check_labels

_KEY = "function_defaults"
_POLICIES = "policies"
#: Roles a token can have (``service.tokens``).
ROLES = ("admin", "user")
#: The most reserved node groups and classes a policy lists.
MAX_POLICY_ENTRIES = 64
_CLASSES_EXAMPLE = "{'policies': {'allowed_priority_classes': ['low', 'medium']}}"
_GROUPS_EXAMPLE = (
    "{'policies': {'reserved_node_groups': [{'name': 'gpu', 'node_selector': "
    "{'runplane.io/pool': 'gpu'}, 'reason': 'kept for serving'}]}}"
)


class Policies(pydantic.BaseModel):
    """An admin's changes to the policies; a key left unset keeps the configured value."""

    model_config = pydantic.ConfigDict(extra="forbid")

    allowed_priority_classes: (
        Annotated[list[str], pydantic.Field(min_length=1, max_length=MAX_POLICY_ENTRIES)] | None
    ) = None
    #: Class -> the roles that may use it, over ``priority_classes.allowed_roles``.
    priority_class_roles: (
        Annotated[
            dict[str, Annotated[list[Literal["admin", "user"]], pydantic.Field(min_length=1)]],
            pydantic.Field(max_length=MAX_POLICY_ENTRIES),
        ]
        | None
    ) = None
    reserved_node_groups: (
        Annotated[list[ReservedNodeGroup], pydantic.Field(max_length=MAX_POLICY_ENTRIES)] | None
    ) = None


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


def policies_view(settings: Settings) -> dict[str, Any]:
    """The policies in force, in the shape ``PATCH /api/v1/defaults`` takes under
    ``policies``."""
    classes = settings.priority_classes
    return {
        "allowed_priority_classes": list(classes.valid),
        "priority_class_roles": {k: list(v) for k, v in classes.allowed_roles.items()},
        "reserved_node_groups": [g.model_dump(mode="json") for g in settings.reserved_node_groups],
    }


def _validated(stored: dict[str, Any]) -> Policies:
    try:
        return Policies.model_validate(stored)
    except pydantic.ValidationError as error:
        first = error.errors(include_url=False)[0]
        field = "policies." + ".".join(str(p) for p in first["loc"])
        example = _GROUPS_EXAMPLE if "reserved_node_groups" in field else _CLASSES_EXAMPLE
        raise InvalidValueError(field, first.get("input"), first["msg"], example) from None


def apply_policies(settings: Settings, configured: Settings, stored: dict[str, Any]) -> Settings:
    """``settings`` with an admin's ``stored`` policy changes in force, checked against the
    ``configured`` classes and against the function defaults ``settings`` carries."""
    if not stored:
        return settings
    policies = _validated(stored)
    classes = configured.priority_classes
    field = "policies.allowed_priority_classes"
    update: dict[str, Any] = {}
    if policies.allowed_priority_classes is not None:
        allowed = policies.allowed_priority_classes
        for name in allowed:
            if name not in classes.valid:
                raise InvalidValueError(
                    field,
                    name,
                    "a priority class the service is configured with: " + ", ".join(classes.valid),
                    _CLASSES_EXAMPLE,
                )
        update["valid"] = [name for name in classes.valid if name in allowed]
    if policies.priority_class_roles is not None:
        for name in policies.priority_class_roles:
            if name not in classes.valid:
                raise InvalidValueError(
                    "policies.priority_class_roles",
                    name,
                    "a priority class the service is configured with: " + ", ".join(classes.valid),
                    "{'policies': {'priority_class_roles': {'high': ['admin']}}}",
                )
        update["allowed_roles"] = {
            **classes.allowed_roles,
            **{k: sorted(set(v)) for k, v in policies.priority_class_roles.items()},
        }
    changes: dict[str, Any] = {"priority_classes": classes.model_copy(update=update)}
    if policies.reserved_node_groups is not None:
        _check_groups(policies.reserved_node_groups)
        changes["reserved_node_groups"] = policies.reserved_node_groups
    updated = settings.model_copy(update=changes)
    default = updated.function_defaults.priority_class
    for role in ROLES:  # the default class must stay usable, or every run without one fails
        try:
            check_priority_class(updated, default, role)
        except InvalidValueError:
            raise InvalidValueError(
                field,
                updated.priority_classes.valid,
                f"the default priority class {default!r} must stay allowed; change the "
                "default Priority class first",
                _CLASSES_EXAMPLE,
            ) from None
        except PolicyError:
            raise InvalidValueError(
                "policies.priority_class_roles",
                updated.priority_classes.allowed_roles.get(default),
                f"the default priority class {default!r} must stay open to every role "
                f"({', '.join(ROLES)}); change the default Priority class first",
                "{'policies': {'priority_class_roles': {'high': ['admin']}}}",
            ) from None
    return updated


def _check_groups(groups: list[ReservedNodeGroup]) -> None:
    seen: set[str] = set()
    for index, group in enumerate(groups):
        where = f"policies.reserved_node_groups[{index}]"
        check_dns_label(f"{where}.name", group.name, "'gpu'")
        if group.name in seen:
            raise InvalidValueError(
                f"{where}.name", group.name, "each group's name once", _GROUPS_EXAMPLE
            )
        seen.add(group.name)
        check_labels(f"{where}.node_selector", group.node_selector)
        if not group.node_selector:
            raise InvalidValueError(
                f"{where}.node_selector",
                group.node_selector,
                "the labels that mark the group's nodes (at least one)",
                _GROUPS_EXAMPLE,
            )
        if not 0 < len(group.reason) <= 200:
            raise InvalidValueError(
                f"{where}.reason",
                group.reason,
                "why the group is reserved, in 1 to 200 characters (users read it)",
                "'reserved for core services'",
            )


class DefaultsStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = session_factory(engine)

    def overrides(self) -> dict[str, Any]:
        return self._read(_KEY)

    def policies(self) -> dict[str, Any]:
        """An admin's policy changes (see :class:`Policies`)."""
        return self._read(_POLICIES)

    def _read(self, key: str) -> dict[str, Any]:
        with self._sessions() as session:
            row = session.get(ServiceSetting, key)
            return dict(row.value) if row else {}

    def save(
        self, overrides: dict[str, Any], user: str, policies: dict[str, Any] | None = None
    ) -> None:
        """Store the defaults (and the policies, when given) in one transaction."""
        values = {_KEY: overrides} if policies is None else {_KEY: overrides, _POLICIES: policies}
        with self._sessions.begin() as session:
            for key, value in values.items():
                row = session.get(ServiceSetting, key)
                if row is None:
                    session.add(
                        ServiceSetting(
                            key=key, value=value, updated_at=time.time(), updated_by=user
                        )
                    )
                else:
                    row.value, row.updated_at, row.updated_by = value, time.time(), user

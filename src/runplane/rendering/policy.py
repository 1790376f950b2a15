"""Service policies a function must satisfy: valid priority classes, roles, reserved node groups."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.config import Settings
from runplane.errors import InvalidValueError, PolicyError
from runplane.spec.scheduling import in_requirements, required_node_terms


def check_priority_class(settings: Settings, name: str, role: str | None = None) -> str:
    """``name`` must be a configured user class, and open to ``role`` when roles are given."""
    classes = settings.priority_classes
    if name in classes.system:
        raise PolicyError(
            "priority_class_name",
            f"{name!r} is a system class reserved for core services; user functions use one of "
            + ", ".join(classes.valid),
        )
    if name not in classes.valid:
        raise InvalidValueError(
            "priority_class_name",
            name,
            "valid priority classes are " + ", ".join(classes.valid),
            f"with_priority_class(name={classes.valid[-1]!r})",
        )
    allowed = classes.allowed_roles.get(name)
    if role is not None and allowed is not None and role not in allowed:
        raise PolicyError(
            "priority_class_name",
            f"role {role!r} may not use priority class {name!r} (allowed roles: "
            + ", ".join(allowed)
            + ")",
        )
    return name


def check_reserved_groups(
    settings: Settings, selector: Mapping[str, str], affinity: Mapping[str, Any] | None
) -> None:
    """Refuse a function whose selector or required affinity targets a reserved node group."""
    terms = required_node_terms(affinity) or []
    for group in settings.reserved_node_groups:
        for key, value in group.node_selector.items():
            targeted = selector.get(key) == value or any(
                required == key and value in values
                for term in terms
                for required, values in in_requirements(term)
            )
            if targeted:
                raise PolicyError(
                    "node_selector",
                    f"{key}={value} targets the node group {group.name!r}, which is "
                    f"{group.reason}; choose another node group",
                )

"""The Policies part of Common Parameters as a form: which configured priority classes users'
functions may use and by which roles, and the reserved node groups, to and from the
``policies`` of ``PATCH /api/v1/defaults``.

Only what differs from the policies in force goes into the patch, so saving the defaults alone
stores no copy of the configured policies (a later change of the configuration still applies).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runplane.config import ReservedNodeGroup, Settings
from runplane.errors import InvalidValueError
from runplane.service.defaults import policies_view

#: Who may use a class, as the form offers it: value -> label.
ROLE_CHOICES = {"admin,user": "every role", "admin": "admins only", "user": "users only"}
#: The most reserved-group rows one form carries.
MAX_GROUPS = 64


@dataclass
class PolicyForm:
    allowed: list[str]
    roles: dict[str, str]
    #: Each group as its three fields: name, labels as ``key=value, ...``, why.
    groups: list[tuple[str, str, str]] = field(default_factory=list)


def _roles_value(roles: list[str] | None) -> str:
    return ",".join(sorted(set(roles))) if roles else "admin,user"


def current(settings: Settings, configured: list[str]) -> PolicyForm:
    """The policies in force; ``configured``: every class the form lists, allowed or not."""
    view = policies_view(settings)
    return PolicyForm(
        allowed=list(view["allowed_priority_classes"]),
        roles={c: _roles_value(view["priority_class_roles"].get(c)) for c in configured},
        groups=[
            (g["name"], ", ".join(f"{k}={v}" for k, v in g["node_selector"].items()), g["reason"])
            for g in view["reserved_node_groups"]
        ],
    )


def submitted(data: Mapping[str, Any], getlist: Any, classes: list[str]) -> PolicyForm:
    """The form as sent (``getlist``: the form data's list getter)."""
    names, labels, reasons = (
        [str(v).strip() for v in getlist(key)][:MAX_GROUPS]
        for key in ("group_name", "group_labels", "group_reason")
    )
    groups = [
        row
        for row in zip(names, labels + [""] * len(names), reasons + [""] * len(names), strict=False)
        if any(row)
    ]
    return PolicyForm(
        allowed=[c for c in (str(v) for v in getlist("allowed_class")) if c in classes],
        roles={c: str(data.get(f"roles_{c}") or "admin,user") for c in classes},
        groups=groups,
    )


def _selector(index: int, text: str) -> dict[str, str]:
    selector: dict[str, str] = {}
    for piece in (p.strip() for p in text.replace("\n", ",").split(",")):
        if not piece:
            continue
        key, equals, value = piece.partition("=")
        if not equals:
            raise InvalidValueError(
                f"policies.reserved_node_groups[{index}].node_selector",
                piece,
                "node labels as key=value, separated by commas",
                "'runplane.io/pool=gpu, team=research'",
            )
        selector[key.strip()] = value.strip()
    return selector


def patch(form: PolicyForm, settings: Settings, classes: list[str]) -> dict[str, Any]:
    """The ``policies`` patch: what the form changes of the policies in force (``{}``: none)."""
    view = policies_view(settings)
    change: dict[str, Any] = {}
    if form.allowed != view["allowed_priority_classes"]:
        change["allowed_priority_classes"] = form.allowed
    roles = {
        c: form.roles[c].split(",")
        for c in classes
        if form.roles.get(c) in ROLE_CHOICES
        and form.roles[c] != _roles_value(view["priority_class_roles"].get(c))
    }
    if roles:
        change["priority_class_roles"] = roles
    groups = []
    for index, (name, labels, reason) in enumerate(form.groups):
        group: dict[str, Any] = {"name": name, "node_selector": _selector(index, labels)}
        if reason:
            group["reason"] = reason
        groups.append(group)
    default_reason = ReservedNodeGroup.model_fields["reason"].default
    if [{"reason": default_reason, **g} for g in groups] != view["reserved_node_groups"]:
        change["reserved_node_groups"] = groups
    return change

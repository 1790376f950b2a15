"""Where a function may run: node name, selector, affinity, tolerations, preemption mode, priority.

Affinity and tolerations are stored in the Kubernetes JSON shape (camelCase) whichever way the
user gave them, so that export, render and placement read one representation.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any

from runplane.errors import InvalidValueError
from runplane.spec.base import to_kubernetes_json
from runplane.spec.bounds import MAX_TEXT_BYTES, check_json
from runplane.spec.labels import check_dns_subdomain, check_label_key, check_labels
from runplane.spec.numbers import is_whole


class PreemptionMode(StrEnum):
    """How a function relates to spot (preemptible) nodes; applied at render time."""

    NONE = "none"
    PREVENT = "prevent"
    CONSTRAIN = "constrain"
    ALLOW = "allow"


def check_preemption_mode(field: str, mode: object) -> PreemptionMode:
    try:
        if not isinstance(mode, str):
            raise ValueError(mode)
        return PreemptionMode(mode.lower())
    except ValueError:
        raise InvalidValueError(
            field,
            mode,
            "allowed modes are " + ", ".join(m.value for m in PreemptionMode),
            "with_preemption_mode(mode='prevent')",
        ) from None


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_TOLERATION_OPERATORS = ("Equal", "Exists")
_TAINT_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_EXAMPLE = (
    "{'key': 'app.iguazio.com/lifecycle', 'operator': 'Equal', 'value': 'preemptible', "
    "'effect': 'NoSchedule'}"
)
_AFFINITY_EXAMPLE = (
    "{'nodeAffinity': {'requiredDuringSchedulingIgnoredDuringExecution': {'nodeSelectorTerms': "
    "[{'matchExpressions': [{'key': 'zone', 'operator': 'In', 'values': ['a']}]}]}}}"
)


def _int64(text: object) -> bool:
    """Whether ``text`` is an integer Kubernetes compares with ``Gt``/``Lt`` (an int64)."""
    return (
        isinstance(text, str)
        and is_whole(text)
        and len(text.lstrip("+-").lstrip("0")) <= 19
        and -(2**63) <= int(text) < 2**63
    )


def _check_requirement(field: str, requirement: Any) -> None:
    if not isinstance(requirement, dict) or set(requirement) - {"key", "operator", "values"}:
        raise InvalidValueError(
            field,
            requirement,
            "a requirement has key, operator, values",
            "{'key': 'zone', 'operator': 'In', 'values': ['a']}",
        )
    check_label_key(f"{field}.key", requirement.get("key"))
    operator = requirement.get("operator")
    if operator not in _SELECTOR_OPERATORS:
        raise InvalidValueError(
            f"{field}.operator",
            operator,
            "allowed operators are " + ", ".join(_SELECTOR_OPERATORS),
            "'In'",
        )
    values = requirement.get("values", [])
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise InvalidValueError(f"{field}.values", values, "values are a list of strings", "['a']")
    if operator in ("In", "NotIn") and not values:
        raise InvalidValueError(
            f"{field}.values", values, f"operator {operator} needs at least one value", "['a']"
        )
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidValueError(
            f"{field}.values", values, f"operator {operator} takes no values", "[]"
        )
    if operator in ("Gt", "Lt") and (len(values) != 1 or not _int64(values[0])):
        raise InvalidValueError(
            f"{field}.values", values, f"operator {operator} takes one integer value", "['4']"
        )


def _check_node_selector_terms(field: str, terms: Any) -> None:
    if not isinstance(terms, list):
        raise InvalidValueError(field, terms, "node selector terms are a list", _AFFINITY_EXAMPLE)
    for index, term in enumerate(terms):
        term_field = f"{field}[{index}]"
        if not isinstance(term, dict) or set(term) - {"matchExpressions", "matchFields"}:
            raise InvalidValueError(
                term_field,
                term,
                "a term has matchExpressions and/or matchFields",
                _AFFINITY_EXAMPLE,
            )
        for part in ("matchExpressions", "matchFields"):
            requirements = term.get(part, [])
            if not isinstance(requirements, list):
                raise InvalidValueError(
                    f"{term_field}.{part}", requirements, f"{part} is a list", _AFFINITY_EXAMPLE
                )
            for position, requirement in enumerate(requirements):
                if part == "matchFields":
                    if (
                        not isinstance(requirement, dict)
                        or requirement.get("key") != "metadata.name"
                    ):
                        raise InvalidValueError(
                            f"{term_field}.{part}[{position}]",
                            requirement,
                            "matchFields supports the key metadata.name",
                            "{'key': 'metadata.name', 'operator': 'In', 'values': ['node-1']}",
                        )
                    continue
                _check_requirement(f"{term_field}.{part}[{position}]", requirement)


def check_affinity(field: str, affinity: Any) -> dict[str, Any] | None:
    """Validate an affinity in Kubernetes shape; node affinity is checked in depth."""
    if affinity is None:
        return None
    affinity = to_kubernetes_json(affinity)
    allowed_keys = {"nodeAffinity", "podAffinity", "podAntiAffinity"}
    if not isinstance(affinity, dict) or set(affinity) - allowed_keys:
        raise InvalidValueError(
            field,
            affinity,
            "an affinity has nodeAffinity, podAffinity and/or podAntiAffinity "
            "(camelCase, as in Kubernetes)",
            _AFFINITY_EXAMPLE,
        )
    check_json(field, affinity, MAX_TEXT_BYTES, _AFFINITY_EXAMPLE)
    for kind in ("podAffinity", "podAntiAffinity"):
        if not isinstance(affinity.get(kind, {}), dict):
            raise InvalidValueError(f"{field}.{kind}", affinity[kind], f"{kind} is a mapping")
    node_affinity = affinity.get("nodeAffinity", {})
    node_keys = {
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    }
    if not isinstance(node_affinity, dict) or set(node_affinity) - node_keys:
        raise InvalidValueError(
            f"{field}.nodeAffinity",
            node_affinity,
            "nodeAffinity has requiredDuringSchedulingIgnoredDuringExecution and/or "
            "preferredDuringSchedulingIgnoredDuringExecution",
            _AFFINITY_EXAMPLE,
        )
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        _check_node_selector_terms(
            f"{field}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
            required.get("nodeSelectorTerms") if isinstance(required, dict) else required,
        )
    preferences = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution", [])
    where = f"{field}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    if not isinstance(preferences, list):
        raise InvalidValueError(where, preferences, "a list of {weight, preference}")
    for index, preferred in enumerate(preferences):
        if not isinstance(preferred, dict) or not isinstance(preferred.get("preference"), dict):
            raise InvalidValueError(
                f"{where}[{index}]",
                preferred,
                "a preferred term has a weight (1-100) and a preference",
                "{'weight': 1, 'preference': {'matchExpressions': [...]}}",
            )
        _check_node_selector_terms(f"{where}[{index}]", [preferred["preference"]])
    return affinity


def required_node_terms(affinity: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The node selector terms an affinity requires (any one of them must match a node);
    ``None`` when it requires none, which is not the same as a list of no terms."""
    node_affinity = (affinity or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    return None if required is None else list(required.get("nodeSelectorTerms") or [])


def in_requirements(term: Mapping[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """A node selector term's ``key In values`` requirements, as ``(key, values)``."""
    for expression in term.get("matchExpressions") or []:
        if expression.get("operator") == "In":
            yield expression.get("key", ""), list(expression.get("values") or [])


def check_toleration(field: str, toleration: Any) -> dict[str, Any]:
    toleration = to_kubernetes_json(toleration)
    allowed_keys = {"key", "operator", "value", "effect", "tolerationSeconds"}
    if not isinstance(toleration, dict) or set(toleration) - allowed_keys:
        raise InvalidValueError(
            field,
            toleration,
            "a toleration has key, operator, value, effect, tolerationSeconds",
            _TOLERATION_EXAMPLE,
        )

    def refused(part: str, value: Any, allowed: str) -> InvalidValueError:
        return InvalidValueError(f"{field}.{part}", value, allowed, _TOLERATION_EXAMPLE)

    operator = toleration.get("operator", "Equal")
    if operator not in _TOLERATION_OPERATORS:
        raise refused("operator", operator, "allowed operators are Equal and Exists")
    key = toleration.get("key", "")
    if key:
        check_label_key(f"{field}.key", key)
    elif operator != "Exists":
        raise refused("key", key, "an empty key needs operator Exists (it tolerates every taint)")
    if operator == "Exists" and toleration.get("value"):
        raise refused("value", toleration["value"], "operator Exists takes no value")
    effect = toleration.get("effect", "")
    if effect not in _TAINT_EFFECTS:
        raise refused(
            "effect",
            effect,
            "allowed effects are NoSchedule, PreferNoSchedule, NoExecute (or empty for all)",
        )
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        raise InvalidValueError(
            f"{field}.tolerationSeconds", seconds, "tolerationSeconds is a whole number", "300"
        )
    return toleration


def check_tolerations(field: str, tolerations: Any) -> list[dict[str, Any]]:
    if tolerations is None:
        return []
    if not isinstance(tolerations, list | tuple):
        tolerations = [tolerations]
    return [check_toleration(f"{field}[{i}]", t) for i, t in enumerate(tolerations)]


def check_node_selector(field: str, selector: Any) -> dict[str, str]:
    """Labels a node must carry; ``None`` is no selector."""
    return check_labels(field, to_kubernetes_json(selector or {}))


def check_priority_class_name(field: str, name: Any) -> str:
    return check_dns_subdomain(field, name, "'high'")

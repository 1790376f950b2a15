"""Preemption modes applied at render time: the spot-vs-on-demand table of the product spec.

Given the user's selector S, required node-affinity terms T1..Tn and tolerations L:

=========  ============================  =============================================
mode       tolerations                   required node affinity
=========  ============================  =============================================
none       L                             T
prevent    L without the spot ones       every Ti (or one new term) gets NotIn per spot label
constrain  L + spot tolerations          one term per (Ti, spot label): Ti AND label In
allow      L + spot tolerations          T
=========  ============================  =============================================

The function's spec is only read, so switching modes never leaves traces of the previous one.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

from runplane.config import PreemptibleNodes
from runplane.errors import ConflictError
from runplane.spec.scheduling import PreemptionMode, required_node_terms

Term = dict[str, Any]


def _append_unique(items: list[Any], extra: list[Any]) -> list[Any]:
    return items + [item for item in extra if item not in items]


def check_selector_conflict(
    mode: PreemptionMode, selector: Mapping[str, str], spot: PreemptibleNodes
) -> None:
    """Refuse selectors that can only produce a pod the mode forbids from running anywhere."""
    for key, spot_value in spot.node_selector.items():
        if key not in selector:
            continue
        chosen = selector[key]
        if mode is PreemptionMode.PREVENT and chosen == spot_value:
            raise ConflictError(
                "node_selector",
                f"{key}={chosen} selects spot nodes, but preemption mode 'prevent' keeps the "
                "function off spot nodes; use with_preemption_mode('constrain') to run only on "
                "spot, or 'allow' to permit it",
            )
        if mode is PreemptionMode.CONSTRAIN and chosen != spot_value:
            raise ConflictError(
                "node_selector",
                f"{key}={chosen} selects non-spot nodes, but preemption mode 'constrain' runs "
                f"the function only on spot nodes ({key}={spot_value}); remove the selector or "
                "use with_preemption_mode('prevent')",
            )


def apply_preemption_mode(
    mode: PreemptionMode,
    selector: Mapping[str, str],
    affinity: Mapping[str, Any] | None,
    tolerations: list[dict[str, Any]],
    spot: PreemptibleNodes,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The pod's affinity and tolerations under ``mode``; inputs are not modified."""
    check_selector_conflict(mode, selector, spot)
    affinity_out = pickle.loads(pickle.dumps(dict(affinity))) if affinity else None
    if mode is PreemptionMode.NONE:
        return affinity_out, list(tolerations)
    if not spot.node_selector and mode is PreemptionMode.CONSTRAIN:
        raise ConflictError(
            "preemption_mode",
            "'constrain' needs spot node labels, and preemptible_nodes.node_selector is empty "
            "in the service configuration",
        )
    if mode is PreemptionMode.PREVENT:
        kept = [t for t in tolerations if t not in spot.tolerations]
        if not spot.node_selector:
            return affinity_out, kept
        anti = [
            {"key": key, "operator": "NotIn", "values": [value]}
            for key, value in spot.node_selector.items()
        ]
        terms = required_node_terms(affinity_out) or [{}]
        new_terms = [
            {**term, "matchExpressions": _append_unique(term.get("matchExpressions", []), anti)}
            for term in terms
        ]
        return _with_required_terms(affinity_out, new_terms), kept
    tolerated = _append_unique(list(tolerations), spot.tolerations)
    if mode is PreemptionMode.ALLOW:
        return affinity_out, tolerated
    terms = required_node_terms(affinity_out) or [{}]
    new_terms = [
        {
            **term,
            "matchExpressions": _append_unique(
                term.get("matchExpressions", []),
                [{"key": key, "operator": "In", "values": [value]}],
            ),
        }
        for term in terms
        for key, value in spot.node_selector.items()
    ]
    return _with_required_terms(affinity_out, new_terms), tolerated


def _with_required_terms(affinity: dict[str, Any] | None, terms: list[Term]) -> dict[str, Any]:
    result = affinity or {}
    node_affinity = result.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    return result

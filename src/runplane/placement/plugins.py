"""Placement rules, one small unit each, in kube-scheduler's filter order and words.

Each rule takes the pod's requirements and a node and returns the reasons the node is refused
(empty when it passes). The strings are kube-scheduler's, so users see the same text here, in
"why pending" and in ``kubectl describe pod``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runplane.placement.model import Node, PodRequirements, Taint

Rule = Callable[[PodRequirements, Node], list[str]]

UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Whether one toleration tolerates one taint, as in the Kubernetes API helpers."""
    effect = toleration.get("effect", "")
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key", "")
    if key and key != taint.key:
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(toleration.get("value", "") == taint.value)


def node_unschedulable(pod: PodRequirements, node: Node) -> list[str]:
    if not node.unschedulable:
        return []
    cordon = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
    return [] if any(tolerates(t, cordon) for t in pod.tolerations) else [UNSCHEDULABLE]


def node_name(pod: PodRequirements, node: Node) -> list[str]:
    return [] if pod.node_name in (None, "", node.name) else [NODE_NAME]


def taint_toleration(pod: PodRequirements, node: Node) -> list[str]:
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in pod.tolerations):
            return [f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"]
    return []


def _requirement_matches(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = requirement["key"]
    operator = requirement["operator"]
    values = requirement.get("values", [])
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if not present:
        return False
    try:
        actual, wanted = int(labels[key]), int(values[0])
    except ValueError:
        return False
    return actual > wanted if operator == "Gt" else actual < wanted


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    expressions = term.get("matchExpressions", [])
    fields = term.get("matchFields", [])
    if not expressions and not fields:
        return False  # an empty term selects nothing
    by_field = {"metadata.name": node.name}
    return all(_requirement_matches(r, node.labels) for r in expressions) and all(
        _requirement_matches(r, by_field) for r in fields
    )


def node_affinity(pod: PodRequirements, node: Node) -> list[str]:
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return [NODE_AFFINITY]
    if pod.required_terms is not None and not any(
        _term_matches(term, node) for term in pod.required_terms
    ):
        return [NODE_AFFINITY]
    return []


def resources_fit(pod: PodRequirements, node: Node) -> list[str]:
    reasons = []
    if node.pod_count + 1 > node.allocatable.get("pods", 0):
        reasons.append(TOO_MANY_PODS)
    for resource in sorted(pod.requests, key=lambda name: (name not in ("cpu", "memory"), name)):
        amount = pod.requests[resource]
        if amount > 0 and amount > node.free(resource):
            reasons.append(f"Insufficient {resource}")
    return reasons


#: The filter order of kube-scheduler's default profile; a node stops at its first refusal.
RULES: tuple[Rule, ...] = (
    node_unschedulable,
    node_name,
    taint_toleration,
    node_affinity,
    resources_fit,
)

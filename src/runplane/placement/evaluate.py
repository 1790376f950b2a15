"""Would this pod fit these nodes, and if not, why: the scheduler's verdict without a cluster."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane import meters
from runplane.placement.model import Node, PodRequirements
from runplane.placement.plugins import RULES


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Per node, the reasons it was refused (an empty list means the pod fits there)."""

    reasons: dict[str, list[str]]

    @property
    def fits(self) -> list[str]:
        return [name for name, reasons in self.reasons.items() if not reasons]

    @property
    def schedulable(self) -> bool:
        return bool(self.fits)

    @property
    def message(self) -> str:
        """kube-scheduler's summary, e.g. ``0/3 nodes are available: 1 Insufficient memory, 2
        node(s) had untolerated taint {k: v}.`` (reason counts sorted as text, as it does)."""
        histogram = Counter(reason for reasons in self.reasons.values() for reason in reasons)
        parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
        available = len(self.fits)
        summary = f"{available}/{len(self.reasons)} nodes are available"
        return f"{summary}: {', '.join(parts)}." if parts else f"{summary}."


def refusals(pod: PodRequirements, node: Node) -> list[str]:
    """The reasons of the first rule that refuses ``node``, as kube-scheduler stops there."""
    for rule in RULES:
        if reasons := rule(pod, node):
            return reasons
    return []


def evaluate(pod_spec: Mapping[str, Any] | PodRequirements, nodes: Iterable[Node]) -> Evaluation:
    """Evaluate a rendered pod spec (or its requirements) against every node."""
    pod = (
        pod_spec
        if isinstance(pod_spec, PodRequirements)
        else PodRequirements.from_pod_spec(pod_spec)
    )
    verdicts = {node.name: refusals(pod, node) for node in nodes}
    meters.count("placement_evaluations", units=len(verdicts))
    return Evaluation(verdicts)

"""Cluster-wide objects runplane can create where a cluster lacks them: its PriorityClasses.

User classes order the scheduling queue but never evict running pods (``preemptionPolicy:
Never``), as the best-practices document requires; system classes, for core services, may.
"""

from __future__ import annotations

from typing import Any

from runplane import names
from runplane.config import PriorityClasses


def priority_classes(classes: PriorityClasses) -> list[dict[str, Any]]:
    """PriorityClass objects for every configured user and system class."""
    manifests = []
    for name in classes.valid:
        manifests.append(
            _priority_class(
                name,
                classes.value_of(name),
                "Never",
                f"runplane user class {name}: orders the scheduling queue, never evicts",
            )
        )
    for name in classes.system:
        manifests.append(
            _priority_class(
                name,
                classes.value_of(name),
                "PreemptLowerPriority",
                f"runplane system class {name}: core services, may preempt user pods",
            )
        )
    return manifests


def _priority_class(name: str, value: int, policy: str, description: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": {names.MANAGED_BY: names.MANAGER}},
        "value": value,
        "preemptionPolicy": policy,
        "globalDefault": False,
        "description": description,
    }

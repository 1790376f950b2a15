"""A job's live right-sizing on its pod: the plan as one annotation every runtime reads, and
``resizePolicy: NotRequired`` so the kubelet changes the container's limits in place, never
restarting it.

Checked here, with the function's effective limits: right-sizing raises a limit, so the job
needs one (memory always, CPU when ``max_cpu`` is given) and ``max_*`` may not be below it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from runplane import names
from runplane.config import Settings
from runplane.errors import InvalidValueError
from runplane.spec.autoresize import EXAMPLE, AutoResizePlan
from runplane.spec.function import Function
from runplane.spec.quantity import resource_amount

#: The container's resources that are resized in place without a restart.
RESIZE_POLICY = [
    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
    {"resourceName": "memory", "restartPolicy": "NotRequired"},
]


def autoresize_plan(
    function: Function, limits: dict[str, Any], settings: Settings
) -> AutoResizePlan | None:
    """The function's right-sizing as numbers, checked against its effective ``limits`` and
    capped by the admin's ``retry_limits.max_memory`` (the most memory any attempt may get,
    grown by a retry or in place); ``None`` when it has none."""
    setting = function.spec.autoresize
    if setting is None:
        return None
    plan = AutoResizePlan.of(setting)
    if "memory" not in limits:
        raise InvalidValueError(
            "spec.autoresize",
            setting.max_mem,
            "right-sizing raises a memory limit, and the job has none; set one",
            f"with_limits(mem='512Mi').{EXAMPLE}",
        )
    memory = resource_amount("memory", limits["memory"])
    if plan.max_memory < memory:
        raise InvalidValueError(
            "spec.autoresize.max_mem",
            setting.max_mem,
            f"at least the memory limit {limits['memory']} (right-sizing only raises it)",
            f"with_autoresize(max_mem='{limits['memory']}') or more",
        )
    if plan.max_cpu is not None:
        if "cpu" not in limits:
            raise InvalidValueError(
                "spec.autoresize.max_cpu",
                setting.max_cpu,
                "right-sizing raises a CPU limit, and the job has none; set one or leave "
                "max_cpu out",
                f"with_limits(cpu=1).{EXAMPLE}",
            )
        if plan.max_cpu < resource_amount("cpu", limits["cpu"]):
            raise InvalidValueError(
                "spec.autoresize.max_cpu",
                setting.max_cpu,
                f"at least the CPU limit {limits['cpu']} (right-sizing only raises it)",
                f"with_autoresize(max_mem=..., max_cpu='{limits['cpu']}') or more",
            )
    cap = settings.retry_limits.max_memory
    if cap:
        most = max(min(plan.max_memory, resource_amount("memory", cap)), memory)
        plan = dataclasses.replace(plan, max_memory=most)
    return plan


def mark(pod: dict[str, Any], plan: AutoResizePlan) -> None:
    """Put ``plan`` on a rendered Pod: its annotation, and its container's resize policy."""
    pod["metadata"].setdefault("annotations", {})[names.AUTORESIZE] = plan.to_text()
    pod["spec"]["containers"][0]["resizePolicy"] = [dict(p) for p in RESIZE_POLICY]


def plan_of(pod: dict[str, Any]) -> AutoResizePlan | None:
    """The plan a Pod carries (``None``: it is not right-sized)."""
    text = (pod.get("metadata", {}).get("annotations") or {}).get(names.AUTORESIZE)
    return AutoResizePlan.from_text(text) if isinstance(text, str) else None

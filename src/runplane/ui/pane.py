"""What the Resources pane needs to show its choices: the modes, the classes this user may
use, the service defaults behind empty fields. Shared by New Job and an ML function's Edit."""

from __future__ import annotations

from typing import Any

from runplane.service.access import usable_priority_classes
from runplane.service.server import Server
from runplane.ui.jobform import (
    PREEMPTION_MODES,
    THRESHOLD_STATES,
    VOLUME_TYPES,
    VOLUMES_MODES,
    JobForm,
)

#: Fields whose error a check may report (rows report in the check's summary).
FIELDS = (
    "name",
    "function",
    "file",
    "handler",
    "params",
    "mem_request",
    "mem_limit",
    "cpu_request",
    "cpu_limit",
    "gpu_limit",
    "gpu_type",
    "node_selector",
    "preemption_mode",
    "priority",
    "volumes_mode",
    "cron",
    *(f"threshold.{state}" for state in THRESHOLD_STATES),
)


def pane_context(server: Server, role: str, form: JobForm) -> dict[str, Any]:
    settings = server.settings
    defaults = settings.function_defaults
    usable = usable_priority_classes(settings, role)
    priorities = [("", f"Service default ({defaults.priority_class})")]
    priorities += [(name, name) for name in usable]
    if form.unknown_priority(usable):
        priorities.append((form.priority, f"{form.priority} (not allowed for you)"))
    spot = [("", f"Service default ({defaults.preemption_mode.value})")]
    spot += list(PREEMPTION_MODES.items())
    return {
        "form": form,
        "priority_options": priorities,
        "spot_options": spot,
        "volume_types": VOLUME_TYPES,
        "volumes_modes": VOLUMES_MODES,
        "threshold_states": THRESHOLD_STATES,
        "defaults": defaults,
    }

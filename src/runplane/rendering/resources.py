"""A run's effective resources: what its function asks for, filled in by the service's
defaults, decided once by rendering and carried with the run.

The local runtime sizes a run's cgroup from it, the service records it, retries grow its
memory, and sizing and cost read its numbers; none of them derives requests, limits, the
preemption mode or the priority again. Quantities are kept as written (what records, the API
and pages show) beside their numbers in placement's units (:func:`resource_amount`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runplane.config import Settings
from runplane.errors import ConflictError
from runplane.spec.function import Function
from runplane.spec.quantity import parse_quantity, resource_amount
from runplane.spec.resources import COMPUTE, gpu_entries
from runplane.spec.scheduling import PreemptionMode


@dataclass(frozen=True, slots=True)
class Quantities:
    """Requests or limits: each as written and as a number (millicores, bytes, devices)."""

    written: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: Mapping[str, Any]) -> Quantities:
        """``entries`` (``{"cpu": "500m", "memory": 1e9}``), quantities checked where they
        were set (the function's calls, the service's settings, a rendered manifest)."""
        return cls({name: str(value) for name, value in entries.items()})

    @property
    def amounts(self) -> dict[str, int]:
        """Each as a number, worked out when asked: rendering carries them to every run, and
        most consumers read one or two (each conversion is cached)."""
        return {name: resource_amount(name, value) for name, value in self.written.items()}

    def amount(self, name: str) -> int | None:
        """Resource ``name`` as a number; ``None`` when not set."""
        value = self.written.get(name)
        return None if value is None else resource_amount(name, value)

    @property
    def cpu(self) -> int | None:
        """Millicores; ``None`` when not set."""
        return self.amount("cpu")

    @property
    def memory(self) -> int | None:
        """Bytes; ``None`` when not set."""
        return self.amount("memory")

    @property
    def gpus(self) -> int:
        """Devices of every GPU type together."""
        return sum(gpu_entries(self.amounts).values())


@dataclass(frozen=True, slots=True)
class EffectiveResources:
    """What a run is given: requests and limits, the preemption mode and the priority."""

    requests: Quantities = field(default_factory=Quantities)
    limits: Quantities = field(default_factory=Quantities)
    #: ``None`` where only a rendered Deployment is at hand (a serving replica).
    mode: PreemptionMode | None = None
    priority_class: str = ""
    #: The priority class's value: who goes first where runs wait for room.
    priority: int = 0

    @classmethod
    def of_container(
        cls, container: Mapping[str, Any], settings: Settings, priority_class: str
    ) -> EffectiveResources:
        """What a rendered container is given, for work known only by its manifests."""
        given = container.get("resources", {})
        return cls(
            Quantities.of(given.get("requests", {})),
            Quantities.of(given.get("limits", {})),
            priority_class=priority_class,
            priority=settings.priority_classes.value_of(priority_class),
        )


def effective_mode(function: Function, settings: Settings) -> PreemptionMode:
    """The preemption mode a function renders with (its own, else the service's default)."""
    return function.spec.preemption_mode or settings.function_defaults.preemption_mode


def effective_resources(
    function: Function, settings: Settings, part: str | None = None
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Requests and limits after service defaults fill the keys the function left unset.

    For a ``part`` (dask's ``worker``/``scheduler``, spark's ``driver``/``executor``) the
    part's own resources come first, then the function's, then the defaults. A default GPU
    limit (User jobs defaults) applies to a function's own pods only, and only where the
    function names no GPU at all: ``with_limits(gpus=0)`` opts out, and dask and spark roles
    ask for GPUs themselves.
    """
    defaults = settings.function_defaults.resources
    own_requests = dict(function.spec.resources.requests)
    own_limits = dict(function.spec.resources.limits)
    if part is not None:
        role = getattr(function.spec, f"{part}_resources")
        own_requests |= role.requests
        if gpu_entries(role.limits):  # the part's GPUs replace the function's
            own_limits = {k: v for k, v in own_limits.items() if k in COMPUTE}
        own_limits |= role.limits
    requests = {k: v for k, v in defaults.requests.items() if k in COMPUTE} | own_requests
    limits = {k: v for k, v in defaults.limits.items() if k in COMPUTE} | own_limits
    where = f"{part}_resources" if part else "resources"
    call = f"with_{part}_limits" if part else "with_limits"
    for key in COMPUTE:
        if key in requests and key in limits:
            kind = "cpu" if key == "cpu" else "memory"
            if parse_quantity(key, requests[key], kind) > parse_quantity(key, limits[key], kind):
                origin = ("the service default " if key not in own_limits else "") + "limit"
                raise ConflictError(
                    f"{where}.requests.{key}",
                    f"request {requests[key]!r} is above {origin} {limits[key]!r}; set "
                    f"{call}({'cpu' if key == 'cpu' else 'mem'}=...) at or above the request",
                )
    if part is None and not gpu_entries(own_limits):
        limits |= gpu_entries(defaults.limits)
    gpus = sum(gpu_entries(limits).values())
    return requests, limits, gpus

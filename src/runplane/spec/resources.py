"""CPU, memory and GPU requests and limits, and the QoS class they add up to.

Requests and limits are kept as the user wrote them (``"1G"``, ``1``, ``"500m"``) and in the
Kubernetes shape (``cpu``, ``memory``, ``nvidia.com/gpu``) so rendering is a copy. Extended
resources such as GPUs live in ``limits`` only: Kubernetes requires request == limit for them,
and rendering writes the request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from enum import StrEnum
from fractions import Fraction
from typing import Any

import pydantic

from runplane.errors import ConflictError, InvalidValueError
from runplane.spec.base import SpecModel
from runplane.spec.bounds import MAX_GPUS
from runplane.spec.labels import check_label_key
from runplane.spec.numbers import whole_number
from runplane.spec.quantity import QuantityInput, parse_quantity

#: The smallest memory limit: a run's Python interpreter takes about 13 MiB before the handler
#: starts, so a smaller limit (or 0) would end every run as it starts, out of memory.
MIN_MEMORY_LIMIT = "16Mi"

#: Resources that follow request/limit semantics; everything else is an extended resource.
COMPUTE = ("cpu", "memory")
_KIND = {"cpu": "cpu", "memory": "memory"}
_PARAM = {"cpu": "cpu", "memory": "mem"}


class QoSClass(StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


def check_gpu_type(field: str, gpu_type: object) -> str:
    """An extended resource name must be domain-qualified (``vendor.com/gpu``)."""
    check_label_key(field, gpu_type)
    assert isinstance(gpu_type, str)
    if "/" not in gpu_type or gpu_type.startswith(("kubernetes.io/", "requests.")):
        raise InvalidValueError(
            field,
            gpu_type,
            "a GPU type is a domain-qualified extended resource name outside kubernetes.io",
            "'nvidia.com/gpu', 'amd.com/gpu'",
        )
    return gpu_type


def check_gpu_count(field: str, gpus: object) -> int:
    """A whole number of GPUs, 0 to :data:`MAX_GPUS` (a digit string too, as YAML and forms
    give)."""
    return whole_number(
        field, gpus, 0, MAX_GPUS, "gpus=1", f"GPUs are a whole number from 0 to {MAX_GPUS}"
    )


def check_quantity_setting(field: str, value: object) -> str:
    """A CPU amount (a field named ``cpu``) or memory amount in a setting, kept as text."""
    parse_quantity(field, value, "cpu" if field.endswith("cpu") else "memory")
    return str(value)


def _check_entries(field: str, entries: Mapping[str, Any], with_gpus: bool) -> dict[str, Any]:
    checked: dict[str, Any] = {}
    for key, value in entries.items():
        if key in COMPUTE:
            parse_quantity(f"{field}.{key}", value, _KIND[key])
            checked[key] = value
        elif with_gpus:
            check_gpu_type(f"{field} key", key)
            checked[key] = check_gpu_count(f"{field}.{key}", value)
        else:
            raise InvalidValueError(
                f"{field} key",
                key,
                "requests name cpu and memory; GPUs go in limits (request == limit)",
                "with_requests(mem='1G', cpu=1)",
            )
    return checked


def check_within_limits(requests: Mapping[str, Any], limits: Mapping[str, Any]) -> None:
    """A request above its limit cannot be admitted by Kubernetes; refuse it at the call."""
    for key in COMPUTE:
        if key in requests and key in limits:
            request = parse_quantity(f"requests.{key}", requests[key], _KIND[key])
            limit = parse_quantity(f"limits.{key}", limits[key], _KIND[key])
            if request > limit:
                raise ConflictError(
                    f"resources.requests.{key}",
                    f"request {requests[key]!r} is above the limit {limits[key]!r}; a request "
                    f"must be at most its limit (example: with_requests({_PARAM[key]}="
                    f"{limits[key]!r}))",
                )


class Resources(SpecModel):
    """What a function asks for (requests) and may use at most (limits)."""

    field_path = "spec.resources"

    requests: dict[str, QuantityInput] = pydantic.Field(default_factory=dict)
    limits: dict[str, QuantityInput] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("requests", mode="after")
    @classmethod
    def _requests(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_entries("spec.resources.requests", value, with_gpus=False)

    @pydantic.field_validator("limits", mode="after")
    @classmethod
    def _limits(cls, value: dict[str, Any]) -> dict[str, Any]:
        checked = _check_entries("spec.resources.limits", value, with_gpus=True)
        if "memory" in checked and parse_quantity(
            "memory", checked["memory"], "memory"
        ) < parse_quantity("memory", MIN_MEMORY_LIMIT, "memory"):
            raise InvalidValueError(
                "spec.resources.limits.memory",
                checked["memory"],
                f"a memory limit is at least {MIN_MEMORY_LIMIT}: a run's Python interpreter "
                "takes about 13 MiB before the handler starts, so a smaller limit ends every run "
                "out of memory as it starts (no limit at all: leave it unset)",
                "with_limits(mem='256Mi')",
            )
        if len(gpu_entries(checked)) > 1:
            raise InvalidValueError(
                "spec.resources.limits",
                value,
                "a function uses one GPU type",
                "with_limits(gpus=1, gpu_type='amd.com/gpu')",
            )
        return checked

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> Resources:
        check_within_limits(self.requests, self.limits)
        return self

    # Read and written as the dict MLRun users know: fn.spec.resources["limits"]["memory"].

    def __getitem__(self, part: str) -> Entries:
        if part not in ("requests", "limits"):
            raise KeyError(part)
        return Entries(self, part)

    def get(self, part: str, default: Any = None) -> Any:
        return self[part] if part in ("requests", "limits") else default

    def keys(self) -> list[str]:
        return ["requests", "limits"]

    def items(self) -> list[tuple[str, Entries]]:
        return [(part, self[part]) for part in self.keys()]

    def __contains__(self, part: object) -> bool:
        return part in ("requests", "limits")

    def __eq__(self, other: object) -> bool:
        """Equal to the dict MLRun code compares resources with
        (``{"requests": {...}, "limits": {...}}``), as to another :class:`Resources`."""
        if isinstance(other, Mapping):
            return {"requests": dict(self.requests), "limits": dict(self.limits)} == dict(other)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic models are


class Entries(MutableMapping[str, Any]):
    """``resources["requests"]`` or ``resources["limits"]``: a dict whose writes are checked
    like ``with_requests``/``with_limits`` (a refused write changes nothing)."""

    def __init__(self, resources: Resources, part: str) -> None:
        self._resources = resources
        self._part = part

    def _current(self) -> dict[str, Any]:
        entries: dict[str, Any] = getattr(self._resources, self._part)
        return entries

    def __getitem__(self, key: str) -> Any:
        return self._current()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        setattr(self._resources, self._part, {**self._current(), key: value})

    def __delitem__(self, key: str) -> None:
        entries = dict(self._current())
        del entries[key]
        setattr(self._resources, self._part, entries)

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return repr(self._current())


def gpu_entries(limits: Mapping[str, Any]) -> dict[str, int]:
    """The extended (GPU) resources in a limits mapping."""
    return {key: value for key, value in limits.items() if key not in COMPUTE}


def compute_values(entries: Mapping[str, Any]) -> dict[str, Fraction]:
    """Normalised cpu/memory values of a requests or limits mapping."""
    return {key: parse_quantity(key, entries[key], _KIND[key]) for key in COMPUTE if key in entries}


def qos_class(requests: Mapping[str, Any], limits: Mapping[str, Any]) -> QoSClass:
    """The pod QoS class exactly as the kubelet computes it for a one-container pod.

    Requests default to limits when only a limit is set (the API server does this), so the
    caller may pass the mappings as the user wrote them. Zero quantities count as unset, as
    in the kubelet.
    """
    limit_values = {key: value for key, value in compute_values(limits).items() if value}
    explicit_requests = {key: value for key, value in compute_values(requests).items() if value}
    request_values = {**limit_values, **explicit_requests}
    if not request_values and not limit_values:
        return QoSClass.BEST_EFFORT
    guaranteed = all(
        key in limit_values and request_values.get(key) == limit_values[key] for key in COMPUTE
    )
    return QoSClass.GUARANTEED if guaranteed else QoSClass.BURSTABLE

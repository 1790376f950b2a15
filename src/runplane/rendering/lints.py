"""Warnings about settings that are valid but risky, from the best-practices document.

Each rule is a small function of the effective (defaults-merged) settings returning a
:class:`Lint` or ``None``, so rules read one at a time and are tested one at a time; it is
written as a check returning its advice, and :func:`rule` gives it its code and field.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from runplane.spec.function import Function, FunctionKind
from runplane.spec.quantity import resource_amount
from runplane.spec.resources import gpu_entries
from runplane.spec.scheduling import PreemptionMode


@dataclass(frozen=True, slots=True)
class Lint:
    code: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"warning {self.code} ({self.field}): {self.message}"


@dataclass(frozen=True, slots=True)
class Effective:
    """What the pod will really get, after service defaults and the preemption mode."""

    function: Function
    requests: dict[str, Any]
    limits: dict[str, Any]
    gpus: int
    mode: PreemptionMode

    def asks(self, key: str) -> bool:
        """Whether the pod requests ``key`` (a limit alone is its request too)."""
        return key in self.requests or key in self.limits

    def limit_above_request(self, key: str) -> bool:
        """Whether ``key`` has both, the limit higher: the pod may burst past what it reserved."""
        if key not in self.limits or key not in self.requests:
            return False
        return resource_amount(key, self.limits[key]) > resource_amount(key, self.requests[key])


Rule = Callable[[Effective], Lint | None]


def rule(code: str, field: str) -> Callable[[Callable[[Effective], str | None]], Rule]:
    """A rule from a check that says what is risky (``None``: nothing), as the lint ``code``
    about ``field``, so each check holds only its condition and its advice."""

    def make(check: Callable[[Effective], str | None]) -> Rule:
        @functools.wraps(check)
        def linted(e: Effective) -> Lint | None:
            message = check(e)
            return None if message is None else Lint(code, field, message)

        return linted

    return make


@rule("memory-limit-above-request", "resources")
def memory_limit_above_request(e: Effective) -> str | None:
    if not e.limit_above_request("memory"):
        return None
    return (
        f"memory limit {e.limits['memory']} is above the request {e.requests['memory']}: the "
        "pod may be evicted under node memory pressure, and the cluster autoscaler may not add "
        "nodes for it; set the request equal to the limit for Guaranteed QoS"
    )


@rule("no-requests", "resources")
def no_requests(e: Effective) -> str | None:
    if e.asks("cpu") or e.asks("memory"):
        return None
    return (
        "no CPU or memory requests: the pod is BestEffort, first to be evicted, and the "
        "scheduler places it without reserving anything; set with_requests(mem=..., cpu=...)"
    )


@rule("gpu-without-requests", "resources")
def gpu_without_requests(e: Effective) -> str | None:
    missing = [key for key in ("cpu", "memory") if not e.asks(key)]
    if not e.gpus or not missing:
        return None
    return (
        f"{e.gpus} GPU(s) without a {' or '.join(missing)} request: a GPU node can be filled "
        "by pods that leave this one starved; request CPU and memory too"
    )


@rule("gpus-from-defaults", "resources.limits")
def gpus_from_defaults(e: Effective) -> str | None:
    if not e.gpus or gpu_entries(e.function.spec.resources.limits):
        return None
    return (
        f"{e.gpus} GPU(s) come from the service's User jobs defaults, not from this function: "
        "it waits for a GPU node like any GPU job; with_limits(gpus=0) runs it without GPUs"
    )


@rule("stateful-job-on-spot", "preemption_mode")
def stateful_job_on_spot(e: Effective) -> str | None:
    if e.function.kind is FunctionKind.SERVING or e.mode not in (
        PreemptionMode.ALLOW,
        PreemptionMode.CONSTRAIN,
    ):
        return None
    retry = e.function.spec.retry
    if e.function.spec.retries or (retry is not None and (retry.max_attempts or 1) > 1):
        return None
    return (
        f"this job may run on spot nodes (mode {e.mode.value!r}) and has no retries: a spot "
        "interruption loses its work; set spec.retries (or with_retries), checkpoint from the "
        "handler, or use with_preemption_mode('prevent')"
    )


@rule("gpus-differ-from-workers", "spec.http.workers")
def gpus_differ_from_workers(e: Effective) -> str | None:
    if e.function.kind is not FunctionKind.SERVING or not e.gpus:
        return None
    workers = e.function.spec.http.workers if e.function.spec.http else 1
    if workers == e.gpus:
        return None
    return (
        f"{e.gpus} GPU(s) per pod but {workers} worker(s): each worker should own one GPU, or "
        "the handler must share GPUs itself; use with_http(workers=...) or gpus(...)"
    )


@rule("autoscaling-without-cpu-request", "spec.max_replicas")
def autoscaling_without_cpu_request(e: Effective) -> str | None:
    spec = e.function.spec
    if e.function.kind is not FunctionKind.SERVING or spec.max_replicas is None:
        return None
    if e.asks("cpu"):
        return None
    return (
        "autoscaling on CPU utilisation needs a CPU request to measure against; the "
        "autoscaler will not scale this function; set with_requests(cpu=...)"
    )


@rule("autoscaled-limit-above-request", "resources")
def autoscaled_limit_above_request(e: Effective) -> str | None:
    spec = e.function.spec
    autoscaled = e.function.kind in (FunctionKind.SERVING, FunctionKind.DASK)
    if not autoscaled or spec.max_replicas is None:
        return None
    above = [key for key in ("cpu", "memory") if e.limit_above_request(key)]
    if not above:
        return None
    return (
        f"{' and '.join(above)} limit above the request on an autoscaled "
        f"{e.function.kind.value} function: scaling is decided against the request, so "
        "replicas running above it scale late and are evicted first; set the limit equal to "
        "the request and let replicas, not bursts, absorb load"
    )


@rule("checkpoints-not-on-a-volume", "spec.checkpoint_path")
def checkpoints_not_on_a_volume(e: Effective) -> str | None:
    path = e.function.spec.checkpoint_path
    if not path:
        return None
    for mount in e.function.spec.volume_mounts:
        root = str(mount.get("mountPath", "")).rstrip("/")
        if path == root or path.startswith(root + "/"):
            return None
    return (
        f"checkpoints at {path} are on no volume of the function: in a pod they go with it, "
        "and the next attempt finds none (unless the service's auto-mount is there); mount a "
        "volume that outlives the pod at or above it (e.g. fn.apply(mount_pvc(...)))"
    )


RULES: tuple[Rule, ...] = (
    no_requests,
    memory_limit_above_request,
    gpu_without_requests,
    gpus_from_defaults,
    stateful_job_on_spot,
    gpus_differ_from_workers,
    autoscaling_without_cpu_request,
    autoscaled_limit_above_request,
    checkpoints_not_on_a_volume,
)


def lint(effective: Effective) -> Iterator[Lint]:
    for rule in RULES:
        if (found := rule(effective)) is not None:
            yield found

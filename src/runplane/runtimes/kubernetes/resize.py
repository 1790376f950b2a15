"""A run's pod resized in place through its ``resize`` subresource (Kubernetes 1.35 and later):
the container's limits, and its requests by as much, patched; the kubelet then changes the
running container's cgroup without a restart (the pod is rendered with ``resizePolicy:
NotRequired``; a pod without it may be restarted by the kubelet).

The API server takes a patch the node may not be able to grant: the kubelet says so in the
pod's ``PodResizePending`` condition (reason ``Infeasible``: never on this node; ``Deferred``:
not now). A resize is done once the container's status shows the new limits; one pending is
taken back and refused with the kubelet's words, so nothing is left to apply later behind the
run's back.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from runplane.errors import ResizeRefusedError
from runplane.runs import Reason, ResizeRecord, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.api.calls import Calls, ClusterError, api_message
from runplane.runtimes.kubernetes.api.rest import pods_path
from runplane.runtimes.kubernetes.pod_events import attempt_of, main_container
from runplane.runtimes.resizing import described
from runplane.spec.quantity import resource_amount

STRATEGIC_PATCH = "application/strategic-merge-patch+json"
#: How long the kubelet has to apply a resize before it is taken back and refused.
SETTLE_SECONDS = 20.0
_LOOK = 0.2
MEBIBYTE = 1 << 20


def memory_text(amount: int) -> str:
    return f"{amount // MEBIBYTE}Mi" if amount % MEBIBYTE == 0 else str(amount)


def cpu_text(amount: int) -> str:
    return f"{amount}m"


def _amount(resources: Mapping[str, Any], name: str) -> int | None:
    value = resources.get(name)
    return None if value is None else resource_amount(name, value)


def _container(pod: Mapping[str, Any], section: str) -> Mapping[str, Any]:
    name = main_container(pod)
    items = (pod.get(section) or {}).get(
        "containers" if section == "spec" else "containerStatuses"
    ) or []
    return next((item for item in items if item.get("name") == name), {})


def _pending(pod: Mapping[str, Any]) -> str:
    """The kubelet's words where it cannot apply the resize (``""``: it has not said so)."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodResizePending" and condition.get("status") == "True":
            reason = condition.get("reason") or "Pending"
            return f"{reason}: {condition.get('message') or 'the node cannot grant it'}"
    return ""


class PodResizer:
    """Resizes runs' pods in place, and tells each resize as the run's event."""

    def __init__(
        self,
        calls: Calls,
        pods: Callable[[str], list[dict[str, Any]]],
        publish: Callable[[RunEvent], None],
        settle: float = SETTLE_SECONDS,
    ) -> None:
        self._calls = calls
        self._pods = pods
        self._publish = publish
        self._settle = settle

    def resize(
        self,
        uid: str,
        memory: int | None,
        cpu: int | None,
        by: str,
        why: str,
        mode: str = "manual",
    ) -> ResizeRecord:
        live = [pod for pod in self._pods(uid) if not _ended(pod)]
        if not live:
            raise ResizeRefusedError(f"run {uid} has no running pod to resize")
        if len(live) > 1 or any(pod["metadata"].get("ownerReferences") for pod in live):
            raise ResizeRefusedError(
                "only a job (one pod) is resized in place; this run's kind has several pods"
            )
        pod = live[0]
        spec = _container(pod, "spec").get("resources") or {}
        limits, requests = spec.get("limits") or {}, spec.get("requests") or {}
        memory_from, cpu_from = _amount(limits, "memory"), _amount(limits, "cpu")
        memory_to = memory_from if memory is None else memory
        cpu_to = cpu_from if cpu is None else cpu
        if memory_to == memory_from and cpu_to == cpu_from:
            raise ResizeRefusedError(f"run {uid} cannot be resized: it has these limits already")
        new_limits: dict[str, str] = {}
        new_requests: dict[str, str] = {}
        for name, before, after, text in (
            ("memory", memory_from, memory_to, memory_text),
            ("cpu", cpu_from, cpu_to, cpu_text),
        ):
            if after is None or after == before:
                continue
            new_limits[name] = text(after)
            asked = _amount(requests, name)
            if asked is not None:  # by as much as the limit, never above it
                grown = asked + (after - before) if before is not None else asked
                new_requests[name] = text(max(min(grown, after), 1))
        name = pod["metadata"]["name"]
        self._patch(name, pod, new_limits, new_requests)
        problem = self._settled(name, memory_to, cpu_to)
        if problem:
            old_limits = {k: limits[k] for k in new_limits if k in limits}
            old_requests = {k: requests[k] for k in new_requests if k in requests}
            # the pod may have ended meanwhile, or the API server gone: said below anyway
            with contextlib.suppress(ResizeRefusedError):
                self._patch(name, pod, old_limits, old_requests)
            raise ResizeRefusedError(f"run {uid} cannot be resized: the node says {problem}")
        record = ResizeRecord(
            at=time.time(),
            attempt=attempt_of(pod["metadata"].get("labels") or {}),
            memory_from=memory_from,
            memory_to=memory_to,
            cpu_from=cpu_from,
            cpu_to=cpu_to,
            why=why,
            mode=mode,
            by=by,
        )
        self._publish(
            RunEvent(
                uid,
                RunState.RUNNING,
                reason=Reason.RESIZED,
                message=described(record),
                attempt=record.attempt,
                resize=record,
            )
        )
        return record

    def _patch(
        self,
        name: str,
        pod: Mapping[str, Any],
        limits: Mapping[str, str],
        requests: Mapping[str, str],
    ) -> None:
        resources: dict[str, Any] = {"limits": dict(limits)}
        if requests:
            resources["requests"] = dict(requests)
        body = {"spec": {"containers": [{"name": main_container(pod), "resources": resources}]}}
        try:
            self._calls.unread(
                "PATCH",
                f"{pods_path(self._calls.namespace, name)}/resize",
                body=body,
                content_type=STRATEGIC_PATCH,
            )
        except ApiException as error:
            raise ResizeRefusedError(
                f"the API server refused to resize pod {name}: {api_message(error)}"
            ) from None
        except (ClusterError, OSError) as error:
            raise ResizeRefusedError(f"pod {name} could not be resized: {error}") from None

    def _settled(self, name: str, memory: int | None, cpu: int | None) -> str:
        """Wait until the container runs with the new limits (``""``), or the kubelet says
        why it cannot, or :attr:`_settle` seconds pass."""
        path = pods_path(self._calls.namespace, name)
        deadline = time.monotonic() + self._settle
        while True:
            pod = self._calls.read(f"reading pod {name}", path)
            status = _container(pod, "status").get("resources") or {}
            applied = status.get("limits") or {}
            if _amount(applied, "memory") == memory and _amount(applied, "cpu") == cpu:
                return ""
            problem = _pending(pod)
            if problem:
                return problem
            if _ended(pod):
                return "the pod ended first"
            if time.monotonic() >= deadline:
                return f"the resize was not applied within {self._settle:g} s"
            time.sleep(_LOOK)


def _ended(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or bool(
        pod["metadata"].get("deletionTimestamp")
    )

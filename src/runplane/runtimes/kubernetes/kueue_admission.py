"""Runs admitted by Kueue, on a cluster that runs it: their queues, and what Kueue says of them.

The runtime asks :func:`detect` once, at start: with ``kueue: auto`` (the default) Kueue is used
where its CRDs are served, ``on`` refuses to start without them, ``off`` never uses it. When it
is used, every run's workload is put in its project's LocalQueue (made with the project's
ClusterQueue on its first run, unlimited until an admin sets a quota through
:meth:`KueueAdmission.sync_project_queue`), and a run of several pods is submitted at once:
Kueue admits it whole or not at all, so runplane's own gang placement (:mod:`.gang`) is not
used.

What Kueue says of a waiting workload reaches the run's record through the runtime's events: a
watch of the namespace's Workloads turns a ``QuotaReserved`` condition that is false into a
``pending`` event (``WaitingForQuota``, in the words a quota wait has on every backend: which
resource is short on which flavor, and the runs ahead of it in its queue, counted from the
watched Workloads by :mod:`.kueue_order`), distinct from the scheduler's "no node fits". The
watch keeps only each Workload's name, owner, queue, priority and conditions, and a change
that says nothing new to a run (admitted, its pods ready) costs no lookup. Kueue does not
change a workload when one ahead of it leaves the queue, so a thread of the runtime's, woken
when a queue moves and at most once every :data:`REFRESH_EVERY` seconds, tells again the
first waiting runs of each moved queue whose count changed, from the Workloads and runs
already known (no request to the API server).

An evicted MPIJob or SparkApplication (preempted by a higher priority, or its borrowed
quota reclaimed) is deleted, so that Kueue does not start it again behind runplane's back, and
its attempt ends ``preempted`` with Kueue's reason; the run's retry policy decides what follows,
as for a preempted pod (whose end :mod:`.pod_events` reads from Kueue's mark on it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from runplane import names
from runplane.config import Settings
from runplane.errors import ConfigError
from runplane.runs import Condition, Reason, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes import kueue
from runplane.runtimes.kubernetes.api.calls import Calls, ClusterError
from runplane.runtimes.kubernetes.api.rest import RestApi, object_path
from runplane.runtimes.kubernetes.api.watch import DELETED, VANISHED, PodWatch
from runplane.runtimes.kubernetes.kueue_order import QueueOrder
from runplane.runtimes.kubernetes.pod_events import attempt_of

log = logging.getLogger(__name__)


class Deliver(Protocol):
    """The tracker's :meth:`~runplane.runtimes.kubernetes.tracker.RunTracker.deliver`."""

    def __call__(self, key: str, event: RunEvent | None, forget: bool = False) -> None: ...


PodOf = Callable[[str], dict[str, Any] | None]
_QUEUED = ("Pod", "MPIJob", "SparkApplication", "Deployment")
#: Seconds between two refreshes of the runs ahead: the moves of a busy queue within them are
#: told at once, and a run's count is at most this late.
REFRESH_EVERY = 2.0


def detect(calls: Calls, settings: Settings) -> bool:
    """Whether this runtime's runs go through Kueue (see the module's docstring)."""
    if settings.kueue == "off":
        return False
    try:
        found = kueue.served(calls)
    except ClusterError as error:
        if settings.kueue == "on":
            raise
        log.warning("Kueue not used: its API could not be discovered: %s", error)
        return False
    if not found and settings.kueue == "on":
        raise ConfigError(
            "kueue is 'on', but this cluster does not serve Kueue's CRDs "
            f"({', '.join(kueue.PLURALS)} in {kueue.API_VERSION}); install Kueue, or set "
            "kueue: auto (use it where found) or off"
        )
    return found


class KueueAdmission:
    """Puts runs in their projects' queues and reports what Kueue says of them."""

    def __init__(
        self,
        calls: Calls,
        rest: RestApi,
        settings: Settings,
        deliver: Deliver,
        pod_of: PodOf,
    ) -> None:
        self._calls = calls
        self._deliver = deliver
        self._classes = frozenset(settings.priority_classes.valid)
        self._pod_of = pod_of
        self._projects: set[str] = set()
        self._lock = threading.Lock()
        #: The run (uid, attempt) of each workload's owner, by the owner's uid.
        self._owners: dict[str, tuple[str, int] | None] = {}
        try:
            kueue.ensure_cluster_setup(calls, settings.spot, settings.priority_classes)
        except ClusterError as error:  # an admin may have made them, and kept the rights
            log.warning("Kueue's flavors and priority classes not applied: %s", error)
        #: The pending workloads of each queue, in Kueue's order: the runs ahead of one.
        self.order = QueueOrder()
        #: Held while a run is told of its workload: by the watch and the refresher in turn,
        #: so that an older count never follows a newer one.
        self._telling = threading.Lock()
        self._stopping = threading.Event()
        self._refresher = threading.Thread(
            target=self._refreshing, name="runplane-kueue-ahead", daemon=True
        )
        path = f"/apis/{kueue.API_VERSION}/namespaces/{calls.namespace}/workloads"
        self.watch = PodWatch(
            rest,
            calls.namespace,
            "",
            self._observe,
            name="runplane-kueue-watch",
            path=path,
            keep=_kept,
        )

    def start(self) -> None:
        self.watch.start()
        self._refresher.start()

    def stop(self) -> None:
        self._stopping.set()
        self.order.marked.set()
        self.watch.stop()
        if self._refresher.is_alive():
            self._refresher.join(10)

    # -- queues ---------------------------------------------------------------------------

    def sync_project_queue(
        self, project: str, quotas: Mapping[str, Mapping[str, kueue.Terms]] | None
    ) -> None:
        """Set ``project``'s quota per flavor (``None``: unlimited); see
        :func:`runplane.runtimes.kubernetes.kueue.sync_project_queue`."""
        kueue.sync_project_queue(self._calls, project, quotas)
        with self._lock:
            self._projects.add(project)

    def _ensure_queue(self, project: str) -> None:
        """The project's queues, made unlimited where they do not exist; an existing
        ClusterQueue keeps the quota an admin gave it."""
        with self._lock:
            if project in self._projects:
                return
        namespace = self._calls.namespace
        for body in (
            kueue.cluster_queue(namespace, project, {}),
            kueue.local_queue(namespace, project),
        ):
            meta = body["metadata"]
            plural = "clusterqueues" if body["kind"] == "ClusterQueue" else "localqueues"
            where = f"/namespaces/{namespace}" if "namespace" in meta else ""
            path = f"/apis/{kueue.API_VERSION}{where}/{plural}"
            try:
                self._calls.checked(
                    f"creating {body['kind']} {meta['name']}",
                    lambda path=path, body=body: self._calls.create(  # type: ignore[misc]
                        f"creating {body['kind']}", path, body
                    ),
                )
            except ClusterError as error:
                if error.status != 403:
                    raise
                # an admin keeps the queues: a workload whose queue is missing waits, and
                # Kueue's words for that reach the run
                log.warning("project %s's queues not made: %s", project, error)
        with self._lock:
            self._projects.add(project)

    def queued(self, manifests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The manifests, with the workload (and its pods' template, for a Deployment) put in
        its project's queue with its priority; the project's queues made if missing."""
        out: list[dict[str, Any]] = []
        for manifest in manifests:
            if manifest.get("kind") not in _QUEUED:
                out.append(dict(manifest))
                continue
            copy = dict(manifest)
            meta = copy["metadata"] = dict(manifest.get("metadata") or {})
            labels = meta["labels"] = dict(meta.get("labels") or {})
            project = labels.get(names.PROJECT, "default")
            self._ensure_queue(project)
            priority = _priority(copy)
            kueue.label(copy, project, priority if priority in self._classes else None)
            if copy["kind"] == "Deployment":
                template = dict(copy["spec"]["template"])
                copy["spec"] = {**copy["spec"], "template": template}
                template_meta = template["metadata"] = dict(template.get("metadata") or {})
                template_meta["labels"] = {
                    **(template_meta.get("labels") or {}),
                    kueue.QUEUE_LABEL: labels[kueue.QUEUE_LABEL],
                }
            out.append(copy)
        return out

    # -- what Kueue says ------------------------------------------------------------------

    def _observe(self, kind: str, workload: dict[str, Any]) -> None:
        with self._telling:
            self._observed(kind, workload)

    def _observed(self, kind: str, workload: dict[str, Any]) -> None:
        meta = workload.get("metadata") or {}
        owner = _owner(workload)
        if kind in (DELETED, VANISHED):
            self.order.forget(str(meta.get("uid") or ""))
            owner_uid = str((owner or {}).get("uid") or "")
            with self._lock:
                self._owners.pop(owner_uid, None)
            if owner_uid:  # what the tracker last said of it goes with it
                self._deliver(f"kueue-{owner_uid}", None, True)
            return
        self.order.observe(workload, kueue.queue_of(workload))
        if owner is None:
            return
        # Most changes say nothing to a run (admitted, its pods ready): no run looked up.
        waiting = self._waiting(owner, workload)
        eviction = (
            kueue.evicted(workload) if owner["kind"] in ("MPIJob", "SparkApplication") else None
        )
        if waiting is None and eviction is None:
            return
        run = self._run_of(owner, workload)
        if run is None:
            return
        uid, attempt = run
        key = f"kueue-{owner['uid']}"
        if waiting is not None:
            self._deliver(key, _waiting_event(uid, attempt, waiting))
        if eviction is not None:
            self._end_evicted(owner, workload, key, uid, attempt, eviction)

    def _waiting(
        self, owner: Mapping[str, Any], workload: Mapping[str, Any]
    ) -> kueue.Waiting | None:
        """Why ``workload`` waits, with the runs ahead of it now. Until Kueue has looked at a
        pod's workload, the gated pod says it waits."""
        if owner["kind"] == "Pod" and not kueue.considered(workload):
            return None
        uid = str((workload.get("metadata") or {}).get("uid") or "")
        return kueue.waiting(workload, self.order.ahead(uid))

    def refresh(self) -> None:
        """Tell again the waiting runs whose count of runs ahead changed in a queue that
        moved (:meth:`QueueOrder.stale`), from the Workload the watch keeps and the run
        already found for its owner: a run not found yet is told by its own next change."""
        with self._telling:
            for uid in self.order.stale():
                workload = self.watch.get(uid)
                owner = _owner(workload) if workload is not None else None
                if workload is None or owner is None:
                    continue
                waiting = self._waiting(owner, workload)
                with self._lock:
                    run = self._owners.get(str(owner.get("uid") or ""))
                if waiting is not None and run is not None:
                    self._deliver(f"kueue-{owner['uid']}", _waiting_event(*run, waiting))

    def _refreshing(self) -> None:
        """Refresh once a queue moved, then at most every :data:`REFRESH_EVERY` seconds,
        until the runtime stops."""
        while not self._stopping.is_set():
            self.order.marked.wait()
            if self._stopping.wait(REFRESH_EVERY):
                return
            self.order.marked.clear()
            try:
                self.refresh()
            except Exception:  # a bug here must not stop the counts for good
                log.exception("refreshing the runs ahead in Kueue's queues failed")

    def _end_evicted(
        self,
        owner: Mapping[str, Any],
        workload: Mapping[str, Any],
        key: str,
        uid: str,
        attempt: int,
        eviction: tuple[str, str],
    ) -> None:
        """Delete the evicted workload (Kueue would start it again later) and end its attempt
        ``preempted``: the run's retry policy makes the next one."""
        api_version, kind, name = owner["apiVersion"], owner["kind"], owner["name"]
        namespace = (workload.get("metadata") or {}).get("namespace") or self._calls.namespace
        path = object_path(api_version, kind, namespace, name)
        self._calls.change(f"deleting evicted {kind} {name}", "DELETE", path)
        reason, message = eviction
        self._deliver(
            key,
            RunEvent(
                uid=uid,
                attempt=attempt,
                state=RunState.ERROR,
                at=time.time(),
                reason=Reason.PREEMPTED,
                message=f"{reason}: {message}" if message else reason,
            ),
        )

    def _run_of(
        self, owner: Mapping[str, Any], workload: Mapping[str, Any]
    ) -> tuple[str, int] | None:
        """The run (uid, attempt) whose object owns ``workload``, remembered per owner."""
        owner_uid = str(owner.get("uid") or "")
        with self._lock:
            if owner_uid in self._owners:
                return self._owners[owner_uid]
        if owner["kind"] == "Deployment":
            return None  # a serving deployment: no run to tell
        # A pod is looked up in the pod watch; one it has not read yet (it reads a busy
        # stream at its pace, and Kueue may say why a workload waits within that time) is read
        # from the API server, as an operator's object is: Kueue may not change the workload
        # again for a long time, and the run would not be told until then.
        found = self._pod_of(owner_uid) if owner["kind"] == "Pod" else None
        if found is None:
            namespace = (workload.get("metadata") or {}).get("namespace") or self._calls.namespace
            path = object_path(owner["apiVersion"], owner["kind"], namespace, owner["name"])
            try:
                found = self._calls.read(f"reading {owner['kind']} {owner['name']}", path)
            except ClusterError:
                return None
            if (found.get("metadata") or {}).get("uid") != owner_uid:
                return None  # another object of the owner's name: the owner is gone
        labels = (found.get("metadata") or {}).get("labels") or {}
        run = (labels[names.RUN_UID], attempt_of(labels)) if labels.get(names.RUN_UID) else None
        with self._lock:
            self._owners[owner_uid] = run
        return run


def _owner(workload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object that owns ``workload``, where runplane queues objects of its kind."""
    owners = (workload.get("metadata") or {}).get("ownerReferences") or []
    owner = next(iter(owners), None)
    return owner if owner and owner.get("kind") in _QUEUED else None


def _waiting_event(uid: str, attempt: int, waiting: kueue.Waiting) -> RunEvent:
    """The run's attempt ``pending``, for the reason Kueue holds it."""
    return RunEvent(
        uid=uid,
        attempt=attempt,
        state=RunState.PENDING,
        at=time.time(),
        condition=Condition.PENDING_NOT_SCHEDULED
        if waiting.for_quota
        else Condition.PENDING_SCHEDULED,
        reason=waiting.reason,
        message=waiting.message,
    )


def _kept(workload: dict[str, Any]) -> dict[str, Any]:
    """What the watch keeps of a Workload: its name, owner and state, not its pods' templates
    (most of its size)."""
    spec = workload.get("spec") or {}
    return {
        "metadata": workload.get("metadata") or {},
        "spec": {k: spec[k] for k in ("queueName", "priority", "active") if k in spec},
        "status": {"conditions": (workload.get("status") or {}).get("conditions") or []},
    }


def _priority(workload: Mapping[str, Any]) -> str | None:
    """The priority class the workload's pods are rendered with."""
    spec = workload.get("spec") or {}
    if workload.get("kind") == "Pod":
        return spec.get("priorityClassName")
    if workload.get("kind") == "MPIJob":
        for replica in (spec.get("mpiReplicaSpecs") or {}).values():
            found = ((replica.get("template") or {}).get("spec") or {}).get("priorityClassName")
            if found:
                return str(found)
        return None
    if workload.get("kind") == "SparkApplication":
        return (spec.get("driver") or {}).get("priorityClassName")
    if workload.get("kind") == "Deployment":
        return ((spec.get("template") or {}).get("spec") or {}).get("priorityClassName")
    return None

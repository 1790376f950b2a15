"""The local runtime: rendered pods become supervised processes on this machine.

The machine is one node. A run that fits is queued on the capacity ledger (shared by every
runplane process here); one scheduler thread per process asks the ledger for grants, in
kube-scheduler's queue order, and hands each granted run to a supervisor thread
(:mod:`~runplane.runtimes.local.supervise`), which holds it in a cgroup of its own
(:mod:`~runplane.runtimes.local.cgroups`) or, where none is writable, under the watchdog, as
its own user when runplane serves as root (:mod:`~runplane.runtimes.local.users`). A run that
can never fit waits with the reason. Everything the runtime learns leaves as a
:class:`RunEvent`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from runplane import names
from runplane.config import PreemptibleNodes, Settings
from runplane.errors import ConfigError, NotFoundError, ResizeRefusedError
from runplane.placement import Node, NodeSummary, PodRequirements, evaluate
from runplane.placement.quotas import ON_DEMAND, SPOT, QuotaTable
from runplane.runs import Condition, Reason, ResizeRecord, RunState, Usage
from runplane.runtimes.contract import Answer, Call, Capabilities, RunRequest
from runplane.runtimes.events import EventChannel, RunEvent
from runplane.runtimes.labelling import check_label_change
from runplane.runtimes.local.cgroups import Hierarchy, Unavailable, open_hierarchy
from runplane.runtimes.local.gang import prepare
from runplane.runtimes.local.launch import CHILD, LocalRun, plan, server_environment
from runplane.runtimes.local.ledger import Claim, Grant, Ledger
from runplane.runtimes.local.node import (
    detect_capacity,
    local_node,
    node_labels,
    store_label_change,
)
from runplane.runtimes.local.remains import end_left
from runplane.runtimes.local.resize import Refused, resize
from runplane.runtimes.local.supervise import Supervisor
from runplane.runtimes.local.users import RunUsers
from runplane.runtimes.local.warm import WarmLauncher
from runplane.runtimes.local.watchdog import ProcessTable
from runplane.runtimes.output import OUTPUT, read_output, run_dir
from runplane.runtimes.resizing import described
from runplane.spec.scheduling import in_requirements

log = logging.getLogger(__name__)

#: Locally a run waits for capacity (never "scheduled but not started") and pulls no image, so
#: two of the four threshold conditions apply.
_CONDITIONS = {
    RunState.PENDING: Condition.PENDING_NOT_SCHEDULED,
    RunState.RUNNING: Condition.RUNNING,
}


def _hierarchy(settings: Settings, millicores: int) -> tuple[Hierarchy | None, str]:
    """Where runs' cgroups are made (``None``: the watchdog), and a sentence saying so."""
    local = settings.local
    watchdog = (
        f"limits by the watchdog (the run's processes measured every {local.poll_interval:g} s, "
        "CPU limits as whole-core affinity)"
    )
    if local.isolation == "watchdog":
        return None, f"{watchdog}, as local.isolation asks"
    try:
        hierarchy = open_hierarchy(millicores)
    except Unavailable as why:
        if local.isolation == "cgroup":
            raise ConfigError(
                f"local.isolation: 'cgroup' asks for a cgroup per run, and none can be made "
                f"here: {why}; set local.isolation: auto to fall back to the watchdog"
            ) from None
        return None, f"{watchdog}: no cgroup is writable here ({why})"
    if "cpu" in hierarchy.enforced:
        cpu = "CPU quota and weight"
    else:
        cpu = "CPU limits as whole-core affinity: the cpu controller is not delegated here"
    if "pids" not in hierarchy.enforced:
        pids = "no pids limit: the pids controller is not delegated here"
    else:
        pids = "no pids limit" if local.pids_limit is None else f"pids.max {local.pids_limit}"
    return hierarchy, (
        f"limits by {hierarchy.version}: a cgroup per run beneath {hierarchy.where} (memory "
        f"without swap, {cpu}, {pids})"
    )


def _price_group(labels: Mapping[str, str], settings: Settings, spot: bool) -> str:
    """The node group this machine's attempts are recorded on, which prices them: its
    ``runplane.io/node-group`` label, else the on-demand group (``service.on_demand_group``)
    unless its labels make it spot. Costs, budgets and the pre-run estimate then agree that
    a machine nobody configured is on-demand capacity."""
    return labels.get(names.NODE_GROUP) or ("" if spot else settings.service.on_demand_group)


def _describe(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"cpu {amount / 1000:g}"
    if resource == "memory":
        return f"memory {amount / 2**30:.1f}Gi"
    return f"{resource} {amount}"


def _needs_spot(pod: PodRequirements, spot: PreemptibleNodes) -> bool:
    """Whether the pod can land only on nodes with a spot label's spot value (its selector, or
    every required affinity term, as preemption mode ``constrain`` renders them)."""
    if any(pod.node_selector.get(key) == value for key, value in spot.node_selector.items()):
        return True

    def spot_term(term: dict[str, Any]) -> bool:
        return any(values == [spot.node_selector.get(key)] for key, values in in_requirements(term))

    terms = pod.required_terms or []
    return bool(terms) and all(spot_term(term) for term in terms)


def _hint(pod: PodRequirements, node: Node, message: str, spot: PreemptibleNodes) -> str:
    """A sentence on why a pod can never fit this machine, beyond the scheduler's words."""
    is_spot = any(node.labels.get(key) == value for key, value in spot.node_selector.items())
    if _needs_spot(pod, spot) and not is_spot:
        labels = " or ".join(f"{key}={value}" for key, value in spot.node_selector.items())
        return (
            f"it may run only on spot nodes ({labels}), as preemption mode 'constrain' or its "
            f"own node selection asks, and this machine is not one (its labels: {node.labels})"
        )
    if "Insufficient" in message:
        short = [r for r, amount in pod.requests.items() if amount > node.allocatable.get(r, 0)]
        asked = ", ".join(_describe(r, pod.requests[r]) for r in short)
        has = ", ".join(_describe(r, node.allocatable.get(r, 0)) for r in short)
        return f"it asks for {asked}, and this machine has {has} in all"
    return f"this machine's labels are {node.labels}"


class LocalRuntime:
    """Runs rendered pods as processes here, never overbooking the machine."""

    name = "local"

    def __init__(self, settings: Settings, serving: bool = False) -> None:
        """``serving``: runs come from ``runplane serve``'s users, not from this process's own
        user (which decides ``local.run_users: auto``)."""
        self.settings = settings
        capacity = detect_capacity(settings)
        self._users = RunUsers(settings, serving)
        self._users.seal_home()
        self._users.check(str(settings.local.python or sys.executable), CHILD)
        self._hierarchy, held = _hierarchy(settings, capacity.millicores)
        self.isolation = f"{held}; {self._users.description}"
        self.node = local_node(settings, capacity)
        self.capabilities = Capabilities(
            gpus=bool(capacity.gpu_ids),
            preemption=False,
            node_labels=True,
            deploy=True,
            durable=False,
        )
        self._ledger = Ledger(
            settings.local.home / "capacity.db", self.node, capacity.cpu_ids, capacity.gpu_ids
        )
        self._events = EventChannel()
        self._processes = ProcessTable(max_age=settings.local.poll_interval)
        self._warm = (
            WarmLauncher(str(settings.local.python or sys.executable), server_environment(settings))
            if settings.local.launcher == "warm"
            else None
        )
        self.isolation += (
            "; runs forked from a warm, pre-imported interpreter (local.launcher: warm)"
            if self._warm
            else "; a fresh interpreter per run (local.launcher: fresh)"
        )
        self._supervisor = Supervisor(
            self._processes,
            settings,
            self.node.name,
            self._emit,
            self._hierarchy,
            self._users,
            self._warm,
            self._ledger.grow,
        )
        self._lock = threading.Lock()
        self._waiting: dict[str, LocalRun] = {}
        self._running: dict[str, LocalRun] = {}
        self._wake = threading.Event()
        #: Claims to queue and claims to drop on the ledger at the scheduler's next turn.
        self._to_claim: dict[str, Claim] = {}
        self._to_release: set[str] = set()
        self._closed = False
        #: The attempt of each run held here, which its events carry.
        self._attempts: dict[str, int] = {}
        labels = self.node.labels
        self._spot = any(labels.get(k) == v for k, v in settings.spot.node_selector.items())
        self._group = _price_group(labels, settings, self._spot)
        self._scheduler = threading.Thread(
            target=self._schedule, name="runplane-scheduler", daemon=True
        )
        self._scheduler.start()

    @property
    def launcher(self) -> WarmLauncher | None:
        """The warm launcher runs are forked from (``None``: a fresh interpreter per run)."""
        return self._warm

    # -- launching ------------------------------------------------------------------------

    def check(self, request: RunRequest) -> None:
        """Refuse what could never start here: unknown resources, unmapped volumes, missing
        secrets."""
        prepare(plan(request, self.settings, self.node.name), request)

    def launch(self, request: RunRequest) -> None:
        """Queue the run; it starts when the machine has room for it. A later attempt of a run
        waits until the one before it has let go of its capacity, and starts with a fresh
        report (results and errors of the attempt before are not its own)."""
        run = prepare(plan(request, self.settings, self.node.name), request)
        with self._lock:
            previous = self._running.get(run.uid)
        if previous is not None:
            previous.done.wait(timeout=30)
        if request.attempt > 1:
            with contextlib.suppress(OSError):
                report = run.run_dir / "events.jsonl"
                report.rename(report.with_name(f"events.{request.attempt - 1}.jsonl"))
        with self._lock:
            self._attempts[run.uid] = request.attempt
        fit = evaluate(run.requirements, [self.node])
        if not fit.schedulable:
            run.never_fits = True
            hint = _hint(run.requirements, self.node, fit.message, self.settings.spot)
            run.message = f"{fit.message} This run can never start here: {hint}."
            with self._lock:
                self._waiting[run.uid] = run
            self._emit(run.uid, RunState.PENDING, Reason.UNSCHEDULABLE, run.message)
            return
        with self._lock:
            self._to_claim[run.uid] = self._claim(run)
            self._waiting[run.uid] = run
        self._emit(run.uid, RunState.PENDING, Reason.PENDING, "waiting for capacity")
        self._wake.set()

    def _claim(self, run: LocalRun) -> Claim:
        """The run's claim on the ledger, counted against its project's quota on this
        machine's flavor: ``spot`` when its labels are the spot preset's, else ``on-demand``."""
        return dataclasses.replace(run.claim, flavor=SPOT if self._spot else ON_DEMAND)

    def apply_quotas(self, quotas: QuotaTable) -> None:
        """Decide every process's runs on this machine by these project quotas from its
        next admission on (``{}``: none): the ledger shares the table with them."""
        self._ledger.set_quotas(quotas)
        self._wake.set()

    def _schedule(self) -> None:
        interval = max(self.settings.local.poll_interval * 2, 0.02)
        while not self._closed:
            self._wake.wait(interval)
            self._wake.clear()
            with self._lock:
                mine = [uid for uid, run in self._waiting.items() if not run.never_fits]
                claims, self._to_claim = self._to_claim, {}
                released, self._to_release = self._to_release, set()
            if not (mine or claims or released):
                continue
            try:  # one transaction for everything since the last turn
                grants = self._ledger.settle(claims.values(), released, mine)
            except Exception as error:  # the ledger is shared; report and retry next tick
                log.warning("capacity ledger error: %s", error)
                with self._lock:
                    self._to_claim = {**claims, **self._to_claim}
                    self._to_release |= released
                continue
            for grant in grants:
                self._start(grant)
            self._explain_waiting()

    def _explain_waiting(self) -> None:
        with self._lock:
            waiting = [run for run in self._waiting.values() if not run.never_fits]
        if not waiting:
            return
        occupied = self._ledger.occupied()
        explained: dict[str, str] = {}  # runs asking alike are explained once (a queue of many)
        quota_waits = self._ledger.quota_waits
        for run in waiting:
            quota_wait = quota_waits.get(run.uid)
            if quota_wait is not None:
                if quota_wait != run.message:
                    run.message = quota_wait
                    self._emit(run.uid, RunState.PENDING, Reason.WAITING_FOR_QUOTA, quota_wait)
                continue
            key = repr(run.requirements)
            if key not in explained:
                fit = evaluate(run.requirements, [occupied])
                explained[key] = (
                    fit.message if not fit.schedulable else "waiting behind higher-priority runs"
                )
            message = explained[key]
            if message != run.message:
                run.message = message
                self._emit(run.uid, RunState.PENDING, Reason.UNSCHEDULABLE, message)

    def _start(self, grant: Grant) -> None:
        with self._lock:
            run = self._waiting.pop(grant.uid, None)
            if run is None:  # aborted while the grant was being decided
                self._to_release.add(grant.uid)
                self._wake.set()
                return
            if run.never_fits:  # the node was relabelled while the grant was being decided
                self._waiting[grant.uid] = run
                self._to_release.add(grant.uid)
                self._wake.set()
                return
            self._running[grant.uid] = run
        threading.Thread(
            target=self._supervise,
            args=(run, grant),
            name=f"runplane-run-{grant.uid[:8]}",
            daemon=True,
        ).start()

    def _supervise(self, run: LocalRun, grant: Grant) -> None:
        try:
            self._supervisor.run(run, grant)
        except Exception as error:  # before its process (a uid lease): the run ends all the same
            log.exception("supervising run %s failed", run.uid)
            self._emit(
                run.uid,
                RunState.ERROR,
                Reason.EXECUTOR_ERROR,
                f"runplane failed to supervise the run ({type(error).__name__}: {error})",
            )
        finally:
            with self._lock:
                self._to_release.add(run.uid)  # at the scheduler's next turn, woken below
                self._running.pop(run.uid, None)
                if self._attempts.get(run.uid) == run.request.attempt:
                    del self._attempts[run.uid]
            run.done.set()
            self._wake.set()

    # -- stopping -------------------------------------------------------------------------

    def abort(self, uid: str, reason: str, message: str, grace: float | None = None) -> bool:
        """Stop a waiting or running run; ``False`` if this runtime does not hold it. A running
        run is stopped as the kubelet stops a pod: SIGTERM to its first process, then, if it is
        still there after ``grace`` seconds (``None``: its function's grace period), SIGKILL
        to all of it. The supervisor waits out the grace; this returns at once."""
        with self._lock:
            waiting = self._waiting.pop(uid, None)
            running = self._running.get(uid)
        if waiting is not None:
            with self._lock:
                if self._to_claim.pop(uid, None) is None:
                    self._to_release.add(uid)
            self._wake.set()
            self._emit(uid, RunState.ABORTED, reason, message)
            with self._lock:
                self._attempts.pop(uid, None)
            waiting.done.set()
            return True
        if running is None:
            return False
        if running.request_abort(reason, message, grace):
            self._emit(uid, RunState.ABORTING, reason, message)
        return True

    def aborting(self, uid: str, reason: str, message: str) -> None:
        """Nothing: :meth:`abort` reports the run ``aborting`` (or ``aborted``) as it is
        called, and returns at once."""

    def close(self, grace: float = 0.0) -> None:
        """Start nothing more; give running runs ``grace`` seconds, then abort them (they die
        with this process), and let queued runs go unreported: the caller settles them."""
        self._closed = True
        self._wake.set()
        with self._lock:
            waiting = list(self._waiting.values())
            self._waiting.clear()
            self._to_claim.clear()
        self._ledger.settle([], [run.uid for run in waiting], [])
        deadline = time.monotonic() + grace
        with self._lock:
            running = list(self._running.values())
        for run in running:
            run.done.wait(max(deadline - time.monotonic(), 0.0))
        message = "the runplane process that owned the run exited" + (
            f" (after waiting {grace:g} s for it to finish)" if grace else ""
        )
        for run in running:  # they had their grace: killed at once, as they always were
            self.abort(run.uid, Reason.ABORTED, message, grace=0.0)
        for run in running:
            run.done.wait(timeout=10)
        with self._lock:
            released, self._to_release = self._to_release, set()
        self._ledger.settle([], released, [])
        if self._warm is not None:
            self._warm.close()
        if self._hierarchy is not None:
            self._hierarchy.close()
        self._events.close()

    # -- observing ------------------------------------------------------------------------

    def events(self) -> EventChannel:
        return self._events

    def logs(self, uid: str, offset: int = 0) -> tuple[bytes, int]:
        return read_output(run_dir(self.settings, uid) / OUTPUT, offset)

    def resize(
        self, uid: str, memory: int | None, cpu: int | None, by: str, why: str
    ) -> ResizeRecord:
        """Change a running run's limits in place (:mod:`.resize`): its cgroup's, within the
        machine's free room; told on the run as a ``Resized`` event."""
        with self._lock:
            run = self._running.get(uid)
            waiting = uid in self._waiting
        if waiting:
            raise ResizeRefusedError(
                f"run {uid} has not started; a waiting run cannot be resized in place"
            )
        if run is None or run.sizes is None or run.abort is not None:
            raise ResizeRefusedError(f"run {uid} is not running here")
        if run.request.replicas > 1 or run.request.local_pod is not None:
            raise ResizeRefusedError(
                "only a job (one process) is resized in place; this run's kind starts several"
            )
        try:
            record = resize(
                uid,
                run.request.attempt,
                run.sizes,
                run.group,
                self._ledger.grow,
                memory,
                cpu,
                why,
                mode="manual",
                by=by,
            )
        except Refused as error:
            raise ResizeRefusedError(f"run {uid} cannot be resized: {error}") from None
        self._supervisor.report_resize(run, record, described(record))
        return record

    def usages(self, uids: Iterable[str]) -> dict[str, Usage]:
        return {uid: usage for uid in uids if (usage := self.usage(uid)) is not None}

    def usage(self, uid: str) -> Usage | None:
        with self._lock:
            run = self._running.get(uid)
        if run is None or run.process is None:
            return None
        group = run.group
        if group is not None:
            counters = group.gauges()
            now = counters.memory + run.inherited if counters.memory else 0
            return Usage(counters.peak_memory + run.inherited, counters.cpu_seconds, now)
        if run.usage_so_far is not None:
            return run.usage_so_far
        return Usage(run.peak_memory, self._processes.cpu_seconds(run.process.pid))

    def nodes(self) -> list[NodeSummary]:
        return [self._ledger.occupied().summary()]

    def label_node(self, name: str, labels: Mapping[str, str | None]) -> dict[str, str]:
        """Change this machine's labels, kept in ``local.home`` (:mod:`.node`), and place the
        waiting runs again: one whose selector the new labels match starts waiting for
        capacity, one they no longer match waits saying it never fits."""
        change = check_label_change("labels", labels)
        if name != self.node.name:
            raise NotFoundError(
                f"node {name!r}: the embedded default has one node, this machine, "
                f"{self.node.name!r}"
            )
        with self._lock:
            store_label_change(self.settings, change)
            self.node.labels = node_labels(self.settings)
            self._spot = any(
                self.node.labels.get(k) == v for k, v in self.settings.spot.node_selector.items()
            )
            self._group = _price_group(self.node.labels, self.settings, self._spot)
            for run in self._waiting.values():
                self._place_again(run)
        self._wake.set()
        return dict(self.node.labels)

    def _place_again(self, run: LocalRun) -> None:
        """Called holding ``_lock``."""
        fit = evaluate(run.requirements, [self.node])
        if fit.schedulable and run.never_fits:
            run.never_fits = False
            self._to_claim[run.uid] = self._claim(run)  # queued at the scheduler's next turn
            run.message = "waiting for capacity"
            self._emit(run.uid, RunState.PENDING, Reason.PENDING, run.message)
        elif not fit.schedulable and not run.never_fits:
            if self._to_claim.pop(run.uid, None) is None:
                self._to_release.add(run.uid)
            run.never_fits = True
            hint = _hint(run.requirements, self.node, fit.message, self.settings.spot)
            run.message = f"{fit.message} This run can never start here: {hint}."
            self._emit(run.uid, RunState.PENDING, Reason.UNSCHEDULABLE, run.message)

    def deploy(self, manifests: Sequence[Mapping[str, Any]]) -> list[str]:
        """Run a serving function's replicas here, behind one port (:mod:`.serving`)."""
        from runplane.runtimes.local import serving

        return serving.deploy(self.settings, manifests)

    def deployments(self) -> list[dict[str, Any]]:
        from runplane.runtimes.local import serving

        return serving.list_deployments(self.settings)

    def delete_deployment(self, project: str, name: str) -> str:
        from runplane.runtimes.local import serving

        return serving.delete(self.settings, name, project)

    def invoke(self, project: str, name: str, call: Call) -> Answer:
        from runplane.runtimes.local import serving

        return serving.forward(self.settings, project, name, call)

    def end_left(self, uid: str, attempt: int) -> RunEvent | None:
        """The end the run's process wrote in its directory (:mod:`.remains`), on this node."""
        event = end_left(run_dir(self.settings, uid), uid, attempt)
        if event is None:
            return None
        return replace(event, node=self.node.name, node_group=self._group, spot=self._spot)

    def watching(self) -> str | None:
        """Nothing to wait for: each run's own thread in this process sees its process end."""
        return None

    def existing(self) -> dict[str, list[str]]:
        with self._lock:
            held = [*self._waiting.values(), *self._running.values()]
        return {run.uid: [f"process {run.process.pid}"] if run.process else [] for run in held}

    # -- reporting ------------------------------------------------------------------------

    def _emit(self, uid: str, state: RunState, reason: str, message: str, **extra: Any) -> None:
        self._events.publish(
            RunEvent(
                uid=uid,
                state=state,
                condition=_CONDITIONS.get(state),
                reason=reason,
                message=message,
                attempt=self._attempts.get(uid, 1),
                node=self.node.name,
                node_group=self._group,
                spot=self._spot,
                **extra,
            )
        )

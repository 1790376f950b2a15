"""The run service: from a function to an honest run record, whatever runtime executes it.

It prepares a run (:func:`~runplane.runtimes.request.build_request`), lets the runtime check
it, records it and launches it. Three parts keep the record honest afterwards, each in its own
module around the runs held in memory (:mod:`~runplane.service.live`): the recorder writes the
runtime's events (:mod:`~runplane.service.recorder`), the launcher launches attempts and, at a
start, what a previous process left (:mod:`~runplane.service.launcher`), and the monitor acts
when a run's time is up (:mod:`~runplane.service.monitor`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Self, Unpack

import orjson
import psutil

from runplane.config import Settings
from runplane.errors import ResizeRefusedError
from runplane.rendering import render
from runplane.rendering.reuse import JobRenders
from runplane.runs import LIVE, ResizeRecord, RunRecord, RunState, Usage, check_limit
from runplane.runtimes.contract import RunRequest, Runtime
from runplane.runtimes.request import build_request
from runplane.service import resizing
from runplane.service.budget_holds import RECHECK, BudgetHolds, spot_only
from runplane.service.budgets import Budgets, Verdict, check_budget
from runplane.service.estimates import estimate, past_durations
from runplane.service.launcher import Launcher, Reconciliation
from runplane.service.monitor import Monitor
from runplane.service.quotas import QuotaStore
from runplane.service.recorder import Recorder
from runplane.service.records import RunListing, RunStore, Settled
from runplane.service.replica_feed import ReplicaFeed
from runplane.service.shared import Shared
from runplane.service.usage_samples import Sample, UsageSampler, UsageStore
from runplane.spec.bounds import check_unicode
from runplane.spec.function import Function
from runplane.spec.labels import check_dns_label
from runplane.spec.run_options import RunOptions
from runplane.spec.thresholds import check_thresholds, threshold_seconds

log = logging.getLogger(__name__)


def process_alive(pid: int, started: float) -> bool:
    """Whether the process that started at ``started`` still runs as ``pid`` (a zombie, or a
    new process that took the pid, is not it)."""
    try:
        process = psutil.Process(pid)
        return bool(
            abs(process.create_time() - started) < 1e-3 and process.status() != psutil.STATUS_ZOMBIE
        )
    except psutil.Error:
        return False


#: This process, as the owner of the runs it executes.
THIS_PROCESS = (psutil.Process().pid, psutil.Process().create_time())


def removed_notice(at: float) -> bytes:
    """What a run's output reads as once retention removed it: a marker line with the time."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    return (
        f"[runplane] this run's output and files were removed by the retention policy at "
        f"{when} (logs_max_age); its record is kept\n"
    ).encode()


class RunService:
    """Runs functions on one runtime and keeps their records.

    Runs of a runtime that is not durable die with this process, so each names it as its
    executor; runs on a cluster outlive the service and are watched again after a restart.
    A long-lived ``service`` (``runplane serve``) also keeps its queue across a restart: runs
    it queued that had not started when it stopped are launched again when it starts.

    Nothing runs until :meth:`start`: building one touches no run, so a caller decides when
    the records are settled and the threads begin.
    """

    def __init__(
        self, settings: Settings, store: RunStore, runtime: Runtime, *, service: bool = False
    ) -> None:
        self.service = service
        #: Who a run belongs to when the caller names nobody (the embedded default: the
        #: local user).
        self.default_owner = ""
        self.executor = None if runtime.capabilities.durable else THIS_PROCESS
        #: What the start found; empty until :meth:`start`.
        self.reconciliation = Reconciliation()
        self._shared = shared = Shared(settings, store, runtime)
        self.store, self.runtime = store, runtime
        #: Project quotas: each change is handed to the runtime, which holds runs to them.
        self.quotas = QuotaStore(store.engine, runtime.apply_quotas)
        #: Uids of runs as their records change, for live clients.
        self.feed = shared.feed
        self._live = shared.live
        self._recorder = Recorder(shared)
        self._launcher = Launcher(shared, self._recorder)
        pid = None if self.executor is None else self.executor[0]
        led = settings.service.leader_election
        pickup = led.pickup_interval if service and led.enabled else None
        #: Projects' spend budgets, and the runs they hold (docs/resilience.md).
        self.budgets = Budgets(store.engine, lambda: self._shared.settings)
        self._holds = BudgetHolds(shared, self._launcher, self.budgets, pid)
        self._monitor = Monitor(
            shared, self._recorder, self._launcher, pid, pickup, (self.release_held, RECHECK)
        )
        self._recording = threading.Thread(
            target=lambda: asyncio.run(self._recorder.run()),
            name="runplane-recorder",
            daemon=True,
        )
        self.usage_store = UsageStore(store.engine)
        self._sampler = UsageSampler(self.usage_store, self._live.watched, runtime.usages)
        self._started = False
        #: A replica that does not lead (:meth:`follow`): it records, the leader acts, and
        #: its live pages learn of the leader's changes from the database.
        self._following = False
        self._replica_feed: ReplicaFeed | None = None
        #: Jobs' renderings kept for the runs submitted with their function's JSON.
        self._renders = JobRenders()

    @property
    def settings(self) -> Settings:
        return self._shared.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        """Settings an admin changed apply from the next decision of every part on."""
        self._shared.settings = settings

    @property
    def following(self) -> bool:
        """Whether this is a replica that records runs and abort requests for the leader."""
        return self._following

    def _leads(self) -> bool:
        return not self._following

    def follow(self) -> Self:
        """Serve clients without controlling anything, as a replica that does not lead:
        submitted runs are recorded ``AwaitingLeader`` for the leader to launch, aborts are
        recorded for it to carry out, and nothing is watched or launched here until
        :meth:`start` (this replica became the leader); returns the service."""
        self._following = True
        interval = self.settings.service.leader_election.pickup_interval
        # Once this replica leads, its recorder publishes what changes.
        self._replica_feed = ReplicaFeed(self.store, self.feed, interval, self._leads)
        self._replica_feed.start()
        return self

    def start(self) -> Self:
        """Settle what a previous process left, then record and monitor; returns the service.

        Runs whose executor died end as their attempt left it if it ended unrecorded, else
        ``executor lost`` (a service's own are queued again, or retried); a durable runtime's
        live runs have their thresholds re-armed before the first event arrives, and its
        records and objects are made to agree. Attempts decided before
        a stop (or a crash) and not launched are launched when due, once: the decision is in
        the store, and launching the same attempt again makes no second copy.
        """
        store, runtime, launcher = self.store, self.runtime, self._launcher
        durable = runtime.capabilities.durable
        runtime.apply_quotas(self.quotas.table())  # before any run is queued again
        settled = Settled()
        if not durable:
            settled = store.mark_lost(
                process_alive,
                runtime.name,
                adopt=THIS_PROCESS if self.service else None,
                left=launcher.end_left,
            )
        # Brief records: a restart with thousands of live runs reads no function snapshots.
        for record in store.list_runs(states=LIVE, limit=100_000, brief=True) if durable else []:
            if record.runtime == runtime.name:
                self._live.hold(record.uid, threshold_seconds(record.thresholds))
                launcher.arm_spot_wait(record)
        self._started = True
        self._recording.start()
        self._monitor.start()
        self._sampler.start()
        if durable:
            self.reconciliation = launcher.reconcile()
        else:
            # Before a run is taken as lost, or launched again: did its attempt end unrecorded?
            ended, orphaned = launcher.settle_ended(settled.orphaned)
            ended_waiting, adopted = launcher.settle_ended(settled.adopted)
            launcher.settle_orphans(orphaned)
            self.reconciliation = Reconciliation(
                launcher.relaunch(adopted),
                settled.lost + orphaned,
                ended=settled.ended + ended + ended_waiting,
            )
        executor = None if self.executor is None else self.executor[0]
        for uid, attempt, due in store.pending_retries(runtime.name, executor):
            self._live.schedule(uid, attempt, due)
        self._following = False  # what was recorded for a leader meanwhile is picked up
        return self

    def watching(self) -> str | None:
        """What keeps this service from recording its runs' changes now, in words; ``None``
        while the recorder, the monitor and the runtime's watch all run. A replica that follows
        watches nothing: it serves from the database, which readiness checks on its own."""
        if self._following:
            return None
        if not self._started:
            return "the run service has not started"
        if not self._recording.is_alive():
            return "the recorder of runs' events stopped"
        if not self._monitor.running:
            return "the monitor of runs' thresholds and launches stopped"
        return self.runtime.watching()

    def step_down(self) -> None:
        """Stop controlling at once (this replica lost the lead): no launch, abort, threshold
        or retry from here on, and the runtime's watch ends; clients are still answered,
        as a follower answers them, until the process stops."""
        self._following = True
        if not self._started:
            return
        self._live.close()
        self.runtime.close()
        self._monitor.close()
        self._sampler.close()
        self._shared.aborts.shutdown(wait=False, cancel_futures=True)
        self._recording.join(timeout=30)
        self._started = False  # closing then closes the store alone

    # -- submitting -----------------------------------------------------------------------

    def submit(
        self,
        fn: Function,
        options: RunOptions | None = None,
        source_dir: str = "",
        role: str | None = None,
        uid: str | None = None,
        owner: str | None = None,
        recorded: bytes | None = None,
    ) -> RunRecord:
        """Check, record and launch a run; returns its record. Nothing is recorded on a user
        error.

        A caller that must not start a run twice (a schedule firing again after a crash)
        passes a deterministic ``uid``; a uid already recorded raises ``RunExistsError``.
        A caller that made ``fn.to_dict()`` once for many runs gives it as JSON, ``recorded``
        (the run's record holds it, unless the run is to run another function).
        """
        uid = uid or uuid.uuid4().hex
        given = options or RunOptions()
        submitted = fn
        user = self.default_owner if owner is None else owner

        def built(fn: Function) -> RunRequest:
            return build_request(
                fn,
                self.settings,
                uid=uid,
                params=given.params,
                inputs=given.inputs,
                role=role,
                source_dir=source_dir,
                renders=self._renders,
                kept_as=None if recorded is None or fn is not submitted else (user, recorded),
            )

        request = built(fn)
        budget = self.budgets.decide(fn.metadata.project, request.resources.mode)
        if budget.verdict is Verdict.SPOT:
            fn = spot_only(fn)
            request = built(fn)
        held = budget.text if budget.verdict is Verdict.HOLD else ""
        thresholds = {
            **self.settings.function_defaults.state_thresholds,
            **fn.spec.state_thresholds,
            **check_thresholds("run(state_thresholds=...)", given.state_thresholds),
        }
        self.runtime.check(request)
        if recorded is not None and fn is submitted:
            function = orjson.loads(recorded)  # written by orjson: no lone surrogate in it
        else:
            function = check_unicode("function", fn.to_dict())  # recorded: text only
        following = self._following
        record = self.store.create(
            uid=uid,
            project=fn.metadata.project,
            name=fn.metadata.name,
            runtime=self.runtime.name,
            function=function,
            params=request.invocation.params,
            inputs=request.invocation.inputs,
            thresholds=thresholds,
            priority_class=request.resources.priority_class,
            requests=dict(request.resources.requests.written),
            limits=dict(request.resources.limits.written),
            executor=self.executor,
            owner=user,
            source_dir=source_dir,
            requeue=self.service and self.executor is not None,
            preemption_mode=request.resources.mode.value if request.resources.mode else "",
            awaiting_leader=following and not held,
            held=held,
            adjustments="" if held else budget.text,
        )
        if held:
            self._holds.may_hold = True
            self._live.hold(uid, {})  # its thresholds apply once it is launched
            self.feed.publish([uid])
            return record
        if following:
            self.feed.publish([uid])
            return record
        self._live.hold(uid, threshold_seconds(thresholds))
        self.feed.publish([uid])
        self._launcher.arm_spot_wait(record, fn)
        return record if self._launcher.launch(request) else self.store.get(uid)

    def release_held(self) -> list[str]:
        """Launch the runs a budget held that their project's budget admits now (the period
        rolled over, the budget was raised, cleared or its action changed); their uids. The
        monitor calls it every few seconds; whoever changes a budget calls it at once."""
        if self._following or not self._started:
            return []
        return self._holds.release()

    def budget(self, project: str) -> dict[str, Any]:
        """The project's budget against its spend in the period now (``budget`` is ``None``
        without one)."""
        standing = self.budgets.standing(check_dns_label("project", project))
        return {"project": project, "budget": None} if standing is None else standing.to_json()

    def set_budget(
        self, project: str, values: Mapping[str, Any], by: str | None = None
    ) -> dict[str, Any]:
        """Set the project's budget (checked: field, value, what is allowed, an example), then
        launch what it no longer holds."""
        budget = check_budget(check_dns_label("project", project), values)
        self.budgets.set(budget, self.default_owner if by is None else by)
        self.release_held()
        return self.budget(project)

    def clear_budget(self, project: str) -> dict[str, Any]:
        """Drop the project's budget and launch what it held."""
        self.budgets.clear(check_dns_label("project", project))
        self.release_held()
        return self.budget(project)

    def estimate(self, fn: Function, role: str | None = None) -> dict[str, Any]:
        """What a run of ``fn`` is expected to cost (:mod:`~runplane.service.estimates`), and
        its project's budget."""
        resources = render(fn, self.settings, role=role).resources
        durations = past_durations(self.store.engine, fn.metadata.project, fn.metadata.name)
        expected = estimate(resources.requests.written, resources.mode, self.settings, durations)
        return {"estimate": expected.to_json(), "budget": self.budget(fn.metadata.project)}

    # -- clients --------------------------------------------------------------------------

    def abort(self, uid: str) -> RunRecord:
        """Abort a pending or running run, whichever process owns it (a replica that does
        not lead records the request; the leader carries it out)."""
        record = self.store.request_abort(uid)
        if self._following:
            return record
        if self._monitor.stop(record.uid):
            return self.store.get(record.uid)
        owner_pid, owner_started = self.store.owner(record.uid)
        if owner_pid is not None and not process_alive(owner_pid, owner_started or 0.0):
            settled = self.store.mark_lost(process_alive, left=self._launcher.end_left)
            self.feed.publish(settled.lost + settled.ended)
        return self.store.get(record.uid)

    def get(self, uid: str, owner: str | None = None) -> RunRecord:
        """The run ``uid`` names (see :meth:`RunStore.get`: ``owner`` hides others' runs)."""
        return self.store.get(uid, owner)

    def list_runs(self, *, limit: int = 50, **listing: Unpack[RunListing]) -> list[RunRecord]:
        """The store's listing (see :meth:`RunStore.list_runs`), its limit checked first."""
        return self.store.list_runs(limit=check_limit("limit", limit), **listing)

    def page(
        self, *, limit: int = 50, **listing: Unpack[RunListing]
    ) -> tuple[list[RunRecord], str | None]:
        """A page of the store's listing and the cursor of the next (see
        :meth:`RunStore.page`), its limit checked first."""
        return self.store.page(limit=check_limit("limit", limit), **listing)

    def count_runs(
        self, project: str | None = None, states: Sequence[str] = (), owner: str | None = None
    ) -> int:
        return self.store.count_runs(project=project, states=states, owner=owner)

    def state_counts(self, project: str | None = None, owner: str | None = None) -> dict[str, int]:
        return self.store.state_counts(project=project, owner=owner)

    def logs(self, uid: str, offset: int = 0) -> tuple[bytes, int]:
        """The run's output from byte ``offset`` (a bounded chunk), and the next offset. Once
        retention removed it, a line saying so stands in for it (:func:`removed_notice`)."""
        record = self.store.get(uid)
        if record.logs_removed_at is not None:
            notice = removed_notice(record.logs_removed_at)
            chunk = notice[offset:]
            return chunk, offset + len(chunk)
        return self.runtime.logs(record.uid, offset)

    def resize(self, uid: str, mem: Any = None, cpu: Any = None, by: str = "") -> ResizeRecord:
        """Change a running run's limits in place as ``by`` asks (:mod:`.resizing`). A run
        that dies with its process is resized by that process only: another's is refused,
        naming it."""
        record = self.store.get(uid)
        owner_pid, _ = self.store.owner(record.uid)
        if (
            not self.runtime.capabilities.durable
            and owner_pid is not None
            and owner_pid != os.getpid()
            and record.state is RunState.RUNNING
        ):
            raise ResizeRefusedError(
                f"run {record.uid} is held by another runplane process (pid {owner_pid}); "
                "resize it through the service that runs it (runplane serve, RUNPLANE_API)"
            )
        return resizing.resize(self.runtime, record, mem, cpu, by)

    def usage(self, uid: str) -> Usage:
        """What the run used: the final figures once it ended, the runtime's so far before."""
        record = self.store.get(uid)
        if record.finished:
            return record.usage
        return self.runtime.usage(record.uid) or record.usage

    def samples(self, uid: str) -> list[Sample]:
        """The run's memory and CPU over time: this process's own while it samples the run,
        else what was stored (by whichever replica ran it)."""
        held = self._sampler.points(uid)
        return held if held is not None else self.usage_store.read(uid)

    def wait(self, uid: str, timeout: float | None = None) -> RunRecord:
        finished = self._live.waiter(uid)
        if finished is not None:
            finished.wait(timeout)
            return self.store.get(uid)
        deadline = None if timeout is None else time.monotonic() + timeout
        next_owner_check = 0.0
        while True:  # a run of another process: follow its record
            record = self.store.get(uid)
            if record.finished or (deadline is not None and time.monotonic() >= deadline):
                return record
            if time.monotonic() >= next_owner_check:  # an owner that died ends its runs
                next_owner_check = time.monotonic() + 1.0
                pid, started = self.store.owner(record.uid)
                if pid is not None and not process_alive(pid, started or 0.0):
                    self.store.mark_lost(process_alive, left=self._launcher.end_left)
                    continue
            time.sleep(0.1)

    def close(self, grace: float = 0.0) -> None:
        """Stop, recording the truth of every run this process held.

        Running runs that die with this process get ``grace`` seconds to finish, then are
        aborted; queued ones wait for a service's next start, or end ``aborted`` (see
        :meth:`RunStore.settle_queued`). A durable runtime's runs go on.
        """
        if self._replica_feed is not None:
            self._replica_feed.close()
        if not self._started:
            self.store.close()
            return
        self._live.close()
        self._monitor.close()
        self._sampler.close()
        self._shared.aborts.shutdown(wait=True)
        self.runtime.close(grace)  # its event stream ends once everything it reported is read
        self._recording.join(timeout=30)
        if self.executor is not None:
            requeued, aborted = self.store.settle_queued(self.executor[0])
            if requeued or aborted:
                log.info(
                    "queued runs: %d wait for the next start, %d aborted",
                    len(requeued),
                    len(aborted),
                )
        self.store.close()

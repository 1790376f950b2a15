"""The run service: from a function to an honest run record, whatever runtime executes it.

It prepares a run (:func:`~runplane.runtimes.request.build_request`), lets the runtime check
it, records it, launches it, and keeps the record honest from the runtime's events. Its
monitor aborts runs that stay too long in a condition (state thresholds) and acts on aborts
other processes request. At start it makes the records agree with what the runtime has.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import psutil

from runplane.config import Settings
from runplane.runs import (
    LIVE,
    RETRYABLE,
    TERMINAL,
    Condition,
    Reason,
    RunRecord,
    RunState,
    Usage,
    check_limit,
    classify,
)
from runplane.runtimes.contract import RunRequest, Runtime
from runplane.runtimes.events import RunEvent
from runplane.runtimes.request import build_request
from runplane.service import retries
from runplane.service.feed import RunFeed
from runplane.service.records import RunStore
from runplane.service.retries import RetryDecision
from runplane.service.thresholds import ThresholdClocks
from runplane.spec.function import Function
from runplane.spec.run_options import RunOptions
from runplane.spec.scheduling import PreemptionMode
from runplane.spec.thresholds import check_thresholds, threshold_seconds

log = logging.getLogger(__name__)

_ABORT_POLL = 0.2
LAUNCH_FAILED = "LaunchFailed"
#: Events written in one transaction at most.
_BATCH = 256


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


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What a start found: runs launched again, runs whose executor or pod was gone, and
    objects of runs this service does not know."""

    resubmitted: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)


#: Events arriving faster than this (per second, over the last :data:`_RATE_WINDOW`) make
#: the recorder wait :data:`_LINGER` seconds before it takes a burst, to take a larger one.
_BUSY_RATE = 400.0
_RATE_WINDOW = 40
_LINGER = 0.002


async def _bursts(events: AsyncIterator[RunEvent], limit: int) -> AsyncIterator[list[RunEvent]]:
    """Events grouped as they arrive: each burst is what came while the previous one was
    being handled (a watch delivers them in bursts; one transaction each is far cheaper).

    While events pour in (hundreds of runs a second), a burst waits a moment for more first:
    each is a transaction that holds the write lock submissions also need, and a few larger
    ones cost less than many small ones (measured: a queue of no-op runs goes 10% faster). A
    lone run's events are recorded at once: the wait is for throughput, never on a quiet path.
    """
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
    arrivals: deque[float] = deque(maxlen=_RATE_WINDOW)

    async def pump() -> None:
        try:
            async for event in events:
                queue.put_nowait(event)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(pump())
    ended = False
    while not ended:
        first = await queue.get()
        if first is None:
            break
        now = time.monotonic()
        busy = len(arrivals) == _RATE_WINDOW and now - arrivals[0] < _RATE_WINDOW / _BUSY_RATE
        if busy and queue.qsize() < limit:
            await asyncio.sleep(_LINGER)
        burst = [first]
        while len(burst) < limit and not queue.empty():
            item = queue.get_nowait()
            if item is None:
                ended = True
                break
            burst.append(item)
        arrivals.extend([now] * len(burst))
        yield burst
    await task


class RunService:
    """Runs functions on one runtime and keeps their records.

    Runs of a runtime that is not durable die with this process, so each names it as its
    executor; runs on a cluster outlive the service and are watched again after a restart.
    A long-lived ``service`` (``runplane serve``) also keeps its queue across a restart: runs
    it queued that had not started when it stopped are launched again when it starts.
    """

    def __init__(
        self, settings: Settings, store: RunStore, runtime: Runtime, *, service: bool = False
    ) -> None:
        self.settings = settings
        self.store = store
        self.runtime = runtime
        self.service = service
        #: Who a run belongs to when the caller names nobody (the embedded default: the
        #: local user).
        self.default_owner = ""
        #: Uids of runs as their records change, for live clients.
        self.feed = RunFeed()
        durable = runtime.capabilities.durable
        self.executor = None if durable else THIS_PROCESS
        self._condition = threading.Condition()
        self._clocks = ThresholdClocks()
        #: How long attempts that may run only on spot wait for a node (the spot fallback).
        self._spot_clocks = ThresholdClocks()
        #: Attempts decided and not yet launched: (due time, uid, attempt), soonest first.
        self._due: list[tuple[float, str, int]] = []
        self._launching: set[str] = set()
        self._finished: dict[str, threading.Event] = {}
        self._closed = False
        lost: list[str] = []
        adopted: list[str] = []
        orphaned: list[str] = []
        if not durable:
            lost, adopted, orphaned = store.mark_lost(
                process_alive, runtime.name, adopt=THIS_PROCESS if service else None
            )
        for record in store.list_runs(states=LIVE, limit=100_000) if durable else []:
            # Their thresholds are re-armed before the first event arrives.
            if record.runtime == runtime.name:
                self._clocks.track(record.uid, threshold_seconds(record.thresholds))
                self._finished[record.uid] = threading.Event()
                self._arm_spot_wait(record)
        self._recorder = threading.Thread(
            target=lambda: asyncio.run(self._record()), name="runplane-recorder", daemon=True
        )
        self._recorder.start()
        self._aborts = ThreadPoolExecutor(max_workers=8, thread_name_prefix="runplane-abort")
        self._launcher = ThreadPoolExecutor(max_workers=4, thread_name_prefix="runplane-retry")
        self._monitor = threading.Thread(target=self._watch, name="runplane-monitor", daemon=True)
        self._monitor.start()
        if durable:
            self.reconciliation = self._reconcile()
        else:
            self._settle_orphans(orphaned)
            self.reconciliation = Reconciliation(self._relaunch(adopted), lost + orphaned)
        # Attempts decided before a stop (or a crash) and not launched are launched when due,
        # once: the decision is in the store, and launching the same attempt again makes no
        # second copy.
        executor = None if durable else THIS_PROCESS[0]
        for uid, attempt, due in store.pending_retries(runtime.name, executor):
            self._schedule_retry(uid, attempt, due)

    # -- submitting -----------------------------------------------------------------------

    def submit(
        self,
        fn: Function,
        options: RunOptions | None = None,
        source_dir: str = "",
        role: str | None = None,
        uid: str | None = None,
        owner: str | None = None,
    ) -> RunRecord:
        """Check, record and launch a run; returns its record. Nothing is recorded on a user
        error.

        A caller that must not start a run twice (a schedule firing again after a crash)
        passes a deterministic ``uid``; a uid already recorded raises ``RunExistsError``.
        """
        uid = uid or uuid.uuid4().hex
        given = options or RunOptions()
        request = build_request(
            fn,
            self.settings,
            uid=uid,
            params=given.params,
            inputs=given.inputs,
            role=role,
            source_dir=source_dir,
        )
        thresholds = {
            **self.settings.function_defaults.state_thresholds,
            **fn.spec.state_thresholds,
            **check_thresholds("run(state_thresholds=...)", given.state_thresholds),
        }
        self.runtime.check(request)
        record = self.store.create(
            uid=uid,
            project=fn.metadata.project,
            name=fn.metadata.name,
            runtime=self.runtime.name,
            function=fn.to_dict(),
            params=request.invocation.params,
            inputs=request.invocation.inputs,
            thresholds=thresholds,
            priority_class=request.pod_spec["priorityClassName"],
            requests=request.requests,
            limits=request.limits,
            executor=self.executor,
            owner=self.default_owner if owner is None else owner,
            source_dir=source_dir,
            requeue=self.service and self.executor is not None,
            preemption_mode=retries.effective_mode(fn, self.settings),
        )
        with self._condition:
            self._clocks.track(uid, threshold_seconds(thresholds))
            self._finished[uid] = threading.Event()
        self.feed.publish([uid])
        self._arm_spot_wait(record, fn)
        return record if self._launch(request) else self.store.get(uid)

    def _launch(self, request: RunRequest) -> bool:
        """Hand a recorded run to the runtime; ``False`` if it could not take it.

        Such a run ends ``error`` with the runtime's reason rather than staying ``created``,
        and whatever the attempt made before it failed (a pod whose create timed out after the
        API server took it) is stopped with it.
        """
        try:
            self.runtime.launch(request)
            return True
        except Exception as error:
            message = f"the {self.runtime.name} runtime could not start the run: {error}"
            log.warning("run %s: %s", request.uid, message)
            failed = RunEvent(
                request.uid,
                RunState.ERROR,
                reason=LAUNCH_FAILED,
                message=message,
                attempt=request.attempt,
            )
            self._write([failed])
            try:
                self.runtime.abort(request.uid, LAUNCH_FAILED, message)
            except Exception:
                log.warning(
                    "run %s: stopping what its launch left failed", request.uid, exc_info=True
                )
            return False

    def _relaunch(self, uids: list[str]) -> list[str]:
        """Launch again runs recorded but never started (same uid and attempt: a runtime with
        deterministic names makes no second copy); a run its function no longer allows (a
        policy changed meanwhile) ends ``error`` saying why."""
        relaunched = []
        for uid in uids:
            record = self.store.get(uid)
            with self._condition:
                self._clocks.track(uid, threshold_seconds(record.thresholds))
                self._finished[uid] = threading.Event()
            if record.retry_at is not None:
                continue  # between attempts: the next is launched when due
            try:
                request = self._request(record)
                self.runtime.check(request)
            except Exception as error:
                message = f"the run could not be queued again: {error}"
                self._write(
                    [
                        RunEvent(
                            uid,
                            RunState.ERROR,
                            reason=LAUNCH_FAILED,
                            message=message,
                            attempt=record.attempt,
                        )
                    ]
                )
                continue
            self._arm_spot_wait(record)
            if self._launch(request):
                relaunched.append(uid)
        return relaunched

    def _settle_orphans(self, uids: list[str]) -> None:
        """Runs this service was executing when it died: each attempt ended with it, as a
        lost node's would (retried when the run's policy says so, else the run ends)."""
        for uid in uids:
            record = self.store.get(uid)
            with self._condition:
                self._clocks.track(uid, threshold_seconds(record.thresholds))
                self._finished[uid] = threading.Event()
            message = (
                f"the service executing attempt {record.attempt} stopped while it ran; the "
                "attempt ended with it"
            )
            event = RunEvent(
                uid,
                RunState.ERROR,
                reason=Reason.EXECUTOR_LOST,
                message=message,
                attempt=record.attempt,
            )
            self._write([event])

    def _request(self, record: RunRecord) -> RunRequest:
        """The request of the run's current attempt: its function as that attempt runs it
        (the plan its decision recorded), built like every other."""
        fn = Function.from_dict(record.function)
        current = next((a for a in record.attempts if a.number == record.attempt), None)
        if record.attempt > 1 and current is not None:
            fn = retries.AttemptPlan.of(current).apply(fn)
        return build_request(
            fn,
            self.settings,
            uid=record.uid,
            params=record.params,
            inputs=record.inputs,
            source_dir=self.store.source_dir(record.uid),
            attempt=record.attempt,
        )

    # -- retries --------------------------------------------------------------------------

    def _schedule_retry(self, uid: str, attempt: int, due: float) -> None:
        with self._condition:
            heapq.heappush(self._due, (due, uid, attempt))
            self._condition.notify()

    def _launch_retry(self, uid: str, attempt: int) -> None:
        """Launch the attempt a decision recorded, unless the run moved on (ended, aborted,
        or already launched it); at most one launch of a run at a time."""
        with self._condition:
            if uid in self._launching:
                return
            self._launching.add(uid)
        try:
            record = self.store.get(uid)
            if record.finished or record.attempt != attempt or record.retry_at is None:
                return
            try:
                request = self._request(record)
                self.runtime.check(request)
            except Exception as error:
                message = f"attempt {attempt} could not be prepared: {error}"
                self._write(
                    [
                        RunEvent(
                            uid,
                            RunState.ERROR,
                            reason=LAUNCH_FAILED,
                            message=message,
                            attempt=attempt,
                        )
                    ]
                )
                return
            self._arm_spot_wait(record)
            if self._launch(request):
                self.store.attempt_launched(uid, attempt)
        except Exception:
            log.exception("run %s: launching attempt %d failed", uid, attempt)
        finally:
            with self._condition:
                self._launching.discard(uid)

    def _decisions(self, events: list[RunEvent]) -> tuple[list[RunEvent], dict[int, RetryDecision]]:
        """For each event that ends an attempt in a failure, whether it gets another (see
        :func:`retries.decide`); an end that is not retried says why, when retries were asked
        for."""
        decided: dict[int, RetryDecision] = {}
        out = list(events)
        for index, event in enumerate(events):
            failure = classify(event.state, event.reason, event.message)
            if failure not in RETRYABLE:
                continue
            try:
                record = self.store.get(event.uid)
            except Exception:
                continue
            if record.finished or record.attempt != event.attempt:
                continue
            try:
                decision, why = retries.decide(
                    record,
                    event.state,
                    event.reason,
                    event.message,
                    self.settings,
                    time.time(),
                    self._largest_memory,
                )
            except Exception:  # a bad policy must not keep the run from ending
                log.exception("run %s: the retry decision failed", event.uid)
                continue
            if decision is not None:
                decided[index] = decision
            elif why:
                out[index] = replace(
                    event, message=f"{event.message} ({why})" if event.message else why
                )
        return out, decided

    def _largest_memory(self) -> int | None:
        """The largest node's allocatable memory, in bytes (asked after an OOM kill)."""
        try:
            sizes = [node.allocatable.get("memory", 0) for node in self.runtime.nodes()]
        except Exception:
            log.warning("the nodes could not be read for the OOM memory cap", exc_info=True)
            return None
        return max(sizes, default=0) or None

    def _arm_spot_wait(self, record: RunRecord, fn: Function | None = None) -> None:
        """Start the spot fallback's clock for an attempt that may run only on spot, when its
        policy has one and attempts to spare; stop it otherwise."""
        current = next((a for a in record.attempts if a.number == record.attempt), None)
        armed = False
        pending = None
        if current is not None and current.preemption_mode == PreemptionMode.CONSTRAIN.value:
            try:  # only such runs pay for resolving their policy
                function = fn or Function.from_dict(record.function)
                policy = retries.resolve(function, self.settings)
            except Exception:
                log.warning("run %s: its retry policy could not be read", record.uid)
            else:
                pending = policy.fallback_pending
                armed = pending is not None and record.attempt < policy.max_attempts
        with self._condition:
            if armed and pending is not None:
                self._spot_clocks.track(
                    record.uid, {Condition.PENDING_NOT_SCHEDULED.value: pending}
                )
            else:
                self._spot_clocks.forget(record.uid)

    def _reconcile(self) -> Reconciliation:
        """Make the records and a durable runtime agree after a start (or a crash).

        What exists is reported by the runtime's own events (a run that finished while the
        service was down gets its final state then). Runs recorded but never launched are
        launched again (same attempt: never a second pod); runs with nothing left are finished
        as ``error``; objects of runs unknown here are reported, and deleted when
        ``service.orphan_pods`` says so.
        """
        existing = self.runtime.existing()
        never_launched, lost = [], []
        for record in self.store.list_runs(states=LIVE, limit=100_000):
            if record.runtime != self.runtime.name or record.uid in existing:
                continue
            if record.retry_at is not None:
                continue  # between attempts: the next is launched when due
            if record.state is RunState.CREATED:
                never_launched.append(record.uid)
            else:
                self._write(
                    [
                        RunEvent(
                            uid=record.uid,
                            state=RunState.ERROR,
                            reason=Reason.POD_LOST,
                            message="the run's pod no longer exists (deleted while the service "
                            "was down); how the run ended is unknown",
                            attempt=record.attempt,
                        )
                    ]
                )
                lost.append(record.uid)
        orphans = [uid for uid in existing if uid and not self.store.exists(uid)]
        delete = self.settings.service.orphan_pods == "delete"
        for uid in orphans:
            log.warning(
                "objects of unknown run %s: %s%s",
                uid,
                ", ".join(existing[uid]),
                " - deleting" if delete else "",
            )
            if delete:
                self.runtime.abort(uid, "Orphan", "a pod of a run unknown to the service")
        return Reconciliation(self._relaunch(never_launched), lost, orphans)

    # -- events and thresholds ------------------------------------------------------------

    async def _record(self) -> None:
        """Write the runtime's events in order, a burst per transaction, until it closes."""
        async for burst in _bursts(self.runtime.events(), _BATCH):
            try:
                self._write(burst)
            except Exception:  # the recorder must outlive any one burst
                log.exception("recording a burst of %d events failed", len(burst))

    def _write(self, events: list[RunEvent]) -> None:
        """Record events (with the retry decisions of failed attempts), then start or stop
        their threshold clocks, schedule decided attempts and wake waiters."""
        events, decided = self._decisions(events)
        try:
            applied = self.store.apply_many(events, decided)
        except Exception:  # keep recording; a broken burst is retried one event at a time
            log.exception("recording %d events failed; recording them one by one", len(events))
            applied = [
                self._apply_alone(event, decided.get(index)) for index, event in enumerate(events)
            ]
        with self._condition:
            deadline = self._next_deadline()
            for index, (event, recorded) in enumerate(zip(events, applied, strict=True)):
                if recorded is None:
                    continue
                self._clocks.observe(recorded)
                self._spot_clocks.observe(recorded)
                decision = decided.get(index)
                if decision is not None and recorded.attempt == decision.attempt:
                    heapq.heappush(self._due, (decision.due_at, recorded.uid, decision.attempt))
                elif recorded.state.terminal:
                    finished = self._finished.pop(event.uid, None)
                    if finished is not None:
                        finished.set()
            sooner = self._next_deadline()
            if sooner is not None and (deadline is None or sooner < deadline):
                self._condition.notify()  # the monitor sleeps until the deadline it knew
        self.feed.publish(
            event.uid for event, recorded in zip(events, applied, strict=True) if recorded
        )
        refused = {
            event.uid: event for event, ok in zip(events, applied, strict=True) if ok is None
        }
        for uid, event in refused.items():
            if self._closed or event.state.terminal:
                continue
            if self.store.state_of(uid) in TERMINAL:
                # Something of a run that has ended says it is alive (a pod made by a launch
                # that timed out after the API server took it): it goes, as the record says.
                self._aborts.submit(self.runtime.abort, uid, "Ended", "the run had ended")

    def _apply_alone(self, event: RunEvent, retry: RetryDecision | None) -> RunEvent | None:
        try:
            return self.store.apply(event, retry)
        except Exception:
            log.exception("the event of run %s was not recorded: %s", event.uid, event)
            return None

    def _watch(self) -> None:
        next_poll = time.monotonic()
        while not self._closed:
            with self._condition:
                now = time.time()
                breaches = self._clocks.due(now)
                spot_waits = self._spot_clocks.due(now)
                due = []
                while self._due and self._due[0][0] <= now:
                    _, uid, attempt = heapq.heappop(self._due)
                    due.append((uid, attempt))
                if not (breaches or spot_waits or due):
                    timeout = _ABORT_POLL
                    if (deadline := self._next_deadline()) is not None:
                        timeout = min(timeout, max(deadline - now, 0.0))
                    self._condition.wait(timeout)
            # Aborts on a cluster are API calls; breaches due together are aborted together.
            for breach in breaches:
                self._aborts.submit(self.runtime.abort, breach.uid, Reason.THRESHOLD, breach.text)
            for wait in spot_waits:
                message = (
                    "no spot node was found in time (retry.spot_fallback.pending); the next "
                    "attempt runs on on-demand nodes"
                )
                self._aborts.submit(self.runtime.abort, wait.uid, Reason.SPOT_UNAVAILABLE, message)
            for uid, attempt in due:
                self._launcher.submit(self._launch_retry, uid, attempt)
            if self.executor is not None and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + _ABORT_POLL
                for uid in self.store.abort_requests(self.executor[0]):
                    self._stop(uid)

    def _next_deadline(self) -> float | None:
        """When the monitor next has something to do: a threshold, a spot wait or a retry
        due (called holding the condition)."""
        deadlines = [
            d
            for d in (
                self._clocks.next_deadline(),
                self._spot_clocks.next_deadline(),
                self._due[0][0] if self._due else None,
            )
            if d is not None
        ]
        return min(deadlines, default=None)

    def _stop(self, uid: str) -> bool:
        """Abort a run a person asked to stop: its attempt through the runtime, or, between
        attempts, the run itself (nothing runs to stop); ``False`` if neither had anything."""
        if self.runtime.abort(uid, Reason.ABORTED, "aborted by request"):
            return True
        record = self.store.get(uid)
        if record.retry_at is None or record.finished:
            return False
        message = f"aborted by request before attempt {record.attempt} started"
        self._write(
            [
                RunEvent(
                    uid,
                    RunState.ABORTED,
                    reason=Reason.ABORTED,
                    message=message,
                    attempt=record.attempt,
                )
            ]
        )
        return True

    # -- clients --------------------------------------------------------------------------

    def abort(self, uid: str) -> RunRecord:
        """Abort a pending or running run, whichever process owns it."""
        record = self.store.request_abort(uid)
        if self._stop(record.uid):
            return self.store.get(record.uid)
        owner_pid, owner_started = self.store.owner(record.uid)
        if owner_pid is not None and not process_alive(owner_pid, owner_started or 0.0):
            self.feed.publish(self.store.mark_lost(process_alive)[0])
        return self.store.get(record.uid)

    def get(self, uid: str) -> RunRecord:
        return self.store.get(uid)

    def list_runs(
        self,
        project: str | None = None,
        states: Sequence[str] = (),
        limit: int = 50,
        owner: str | None = None,
        offset: int = 0,
        uids: Sequence[str] | None = None,
        updated_since: float | None = None,
        brief: bool = False,
    ) -> list[RunRecord]:
        limit = check_limit("limit", limit)
        return self.store.list_runs(
            project=project,
            states=states,
            limit=limit,
            owner=owner,
            offset=offset,
            uids=uids,
            updated_since=updated_since,
            brief=brief,
        )

    def count_runs(
        self, project: str | None = None, states: Sequence[str] = (), owner: str | None = None
    ) -> int:
        return self.store.count_runs(project=project, states=states, owner=owner)

    def logs(self, uid: str, offset: int = 0) -> tuple[bytes, int]:
        """The run's output from byte ``offset`` (a bounded chunk), and the next offset."""
        return self.runtime.logs(self.store.get(uid).uid, offset)

    def usage(self, uid: str) -> Usage:
        """What the run used: the final figures once it ended, the runtime's so far before."""
        record = self.store.get(uid)
        if record.finished:
            return record.usage
        return self.runtime.usage(record.uid) or record.usage

    def wait(self, uid: str, timeout: float | None = None) -> RunRecord:
        with self._condition:
            finished = self._finished.get(uid)
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
                    self.store.mark_lost(process_alive)
                    continue
            time.sleep(0.1)

    def close(self, grace: float = 0.0) -> None:
        """Stop, recording the truth of every run this process held.

        Running runs that die with this process get ``grace`` seconds to finish, then are
        aborted; queued ones wait for a service's next start, or end ``aborted`` (see
        :meth:`RunStore.settle_queued`). A durable runtime's runs go on.
        """
        self._closed = True
        with self._condition:
            self._condition.notify_all()
        self._monitor.join(timeout=10)
        self._launcher.shutdown(wait=True)
        self._aborts.shutdown(wait=True)
        self.runtime.close(grace)  # its event stream ends once everything it reported is read
        self._recorder.join(timeout=30)
        if self.executor is not None:
            requeued, aborted = self.store.settle_queued(self.executor[0])
            if requeued or aborted:
                log.info(
                    "queued runs: %d wait for the next start, %d aborted",
                    len(requeued),
                    len(aborted),
                )
        self.store.close()

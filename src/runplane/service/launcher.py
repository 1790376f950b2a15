"""The launcher: a recorded run handed to the runtime, and again after a restart or a failure.

It launches a run's first attempt, the attempts its retry decisions schedule, and, at a start,
what a previous process left: runs queued and never started, runs whose executor died, and
(on a durable runtime) records and the cluster's objects made to agree. An attempt that cannot
be launched ends ``error`` through the recorder, as every end does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from runplane.runs import LIVE, Reason, RunRecord, RunState
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.events import RunEvent
from runplane.runtimes.request import build_request
from runplane.service import retries
from runplane.service.recorder import Recorder
from runplane.service.shared import Shared
from runplane.spec.function import Function
from runplane.spec.scheduling import PreemptionMode
from runplane.spec.thresholds import threshold_seconds

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What a start found: runs launched again, runs whose executor or pod was gone, objects
    of runs this service does not know, and runs that had ended with no one to record it."""

    resubmitted: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    #: Runs that had ended unrecorded, now recorded as what they left behind says.
    ended: list[str] = field(default_factory=list)


class Launcher:
    def __init__(self, shared: Shared, recorder: Recorder) -> None:
        self.shared = shared
        self.recorder = recorder

    def launch(self, request: RunRequest) -> bool:
        """Hand a recorded run to the runtime; ``False`` if it could not take it.

        Such a run ends ``error`` with the runtime's reason rather than staying ``created``,
        and whatever the attempt made before it failed (a pod whose create timed out after the
        API server took it) is stopped with it.
        """
        try:
            self.shared.runtime.launch(request)
            return True
        except Exception as error:
            message = f"the {self.shared.runtime.name} runtime could not start the run: {error}"
            log.warning("run %s: %s", request.uid, message)
            self.failed(request.uid, request.attempt, message)
            try:
                self.shared.runtime.abort(request.uid, Reason.LAUNCH_FAILED, message)
            except Exception:
                log.warning(
                    "run %s: stopping what its launch left failed", request.uid, exc_info=True
                )
            return False

    def failed(self, uid: str, attempt: int, message: str) -> None:
        """End an attempt that could not be launched: ``error``, for the reason that says so."""
        reason = Reason.LAUNCH_FAILED
        failed = RunEvent(uid, RunState.ERROR, reason=reason, message=message, attempt=attempt)
        self.recorder.write([failed])

    def relaunch(self, uids: list[str]) -> list[str]:
        """Launch again runs recorded but never started (same uid and attempt: a runtime with
        deterministic names makes no second copy); a run its function no longer allows (a
        policy changed meanwhile) ends ``error`` saying why."""
        relaunched = []
        for uid in uids:
            record = self.shared.store.get(uid)
            self.shared.live.hold(uid, threshold_seconds(record.thresholds))
            if record.retry_at is not None:
                continue  # between attempts: the next is launched when due
            if record.reason == Reason.BUDGET:
                continue  # its project's budget launches it (budget_holds)
            try:
                request = self.request_of(record)
                self.shared.runtime.check(request)
            except Exception as error:
                message = f"the run could not be queued again: {error}"
                self.failed(uid, record.attempt, message)
                continue
            self.arm_spot_wait(record)
            if self.launch(request):
                relaunched.append(uid)
        return relaunched

    def end_left(self, uid: str, runtime: str, attempt: int) -> RunEvent | None:
        """How an attempt of this service's runtime ended, as what it left behind tells
        (``Runtime.end_left``); ``None`` when nothing says, or it cannot be read."""
        if runtime != self.shared.runtime.name:
            return None
        try:
            return self.shared.runtime.end_left(uid, attempt)
        except Exception:
            log.warning("run %s: what its attempt left could not be read", uid, exc_info=True)
            return None

    def settle_ended(self, uids: list[str]) -> tuple[list[str], list[str]]:
        """Of runs a previous process held, record those whose attempt ended on its own (its
        end was not recorded: the process died first, or its store was full) as the attempt
        left it; returns (those, the others). A run between attempts has nothing to read."""
        ended, others = [], []
        for uid in uids:
            record = self.shared.store.get(uid)
            end = None
            if record.retry_at is None:
                end = self.end_left(uid, record.runtime, record.attempt)
            if end is None:
                others.append(uid)
                continue
            self.shared.live.hold(uid, threshold_seconds(record.thresholds))
            self.recorder.write([end])
            ended.append(uid)
        return ended, others

    def settle_orphans(self, uids: list[str]) -> None:
        """Runs this service was executing when it died: each attempt ended with it, as a
        lost node's would (retried when the run's policy says so, else the run ends)."""
        for uid in uids:
            record = self.shared.store.get(uid)
            self.shared.live.hold(uid, threshold_seconds(record.thresholds))
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
            self.recorder.write([event])

    def request_of(self, record: RunRecord) -> RunRequest:
        """The request of the run's current attempt: its function as that attempt runs it
        (the plan its decision recorded), built like every other."""
        fn = Function.from_dict(record.function)
        current = next((a for a in record.attempts if a.number == record.attempt), None)
        if record.attempt > 1 and current is not None:
            fn = retries.AttemptPlan.of(current).apply(fn)
        return build_request(
            fn,
            self.shared.settings,
            uid=record.uid,
            params=record.params,
            inputs=record.inputs,
            source_dir=self.shared.store.source_dir(record.uid),
            attempt=record.attempt,
        )

    def launch_retry(self, uid: str, attempt: int) -> None:
        """Launch the attempt a decision recorded, unless the run moved on (ended, aborted,
        or already launched it); at most one launch of a run at a time."""
        with self.shared.live.lock:
            if uid in self.shared.live.launching:
                return
            self.shared.live.launching.add(uid)
        try:
            record = self.shared.store.get(uid)
            if record.finished or record.attempt != attempt or record.retry_at is None:
                return
            try:
                request = self.request_of(record)
                self.shared.runtime.check(request)
            except Exception as error:
                message = f"attempt {attempt} could not be prepared: {error}"
                self.failed(uid, attempt, message)
                return
            self.arm_spot_wait(record)
            if self.launch(request):
                self.shared.store.attempt_launched(uid, attempt)
        except Exception:
            log.exception("run %s: launching attempt %d failed", uid, attempt)
        finally:
            with self.shared.live.lock:
                self.shared.live.launching.discard(uid)

    def arm_spot_wait(self, record: RunRecord, fn: Function | None = None) -> None:
        """Start the spot fallback's clock for an attempt that may run only on spot, when its
        policy has one and attempts to spare; stop it otherwise."""
        current = next((a for a in record.attempts if a.number == record.attempt), None)
        armed = False
        pending = None
        if current is not None and current.preemption_mode == PreemptionMode.CONSTRAIN.value:
            try:  # only such runs pay for resolving their policy
                # A brief record (a restart's) has no snapshot: read this run's.
                snapshot = record.function or self.shared.store.get(record.uid).function
                function = fn or Function.from_dict(snapshot)
                policy = retries.resolve(function, self.shared.settings)
            except Exception:
                log.warning("run %s: its retry policy could not be read", record.uid)
            else:
                pending = policy.fallback_pending
                armed = pending is not None and record.attempt < policy.max_attempts
        self.shared.live.wait_for_spot(record.uid, pending if armed else None)

    def reconcile(self) -> Reconciliation:
        """Make the records and a durable runtime agree after a start (or a crash).

        What exists is reported by the runtime's own events (a run that finished while the
        service was down gets its final state then). Runs recorded but never launched are
        launched again (same attempt: never a second pod); runs with nothing left are finished
        as ``error``; objects of runs unknown here are reported, and deleted when
        ``service.orphan_pods`` says so.
        """
        existing = self.shared.runtime.existing()
        never_launched, lost = [], []
        for record in self.shared.store.list_runs(states=LIVE, limit=100_000, brief=True):
            if record.runtime != self.shared.runtime.name or record.uid in existing:
                continue
            if record.retry_at is not None or record.reason == Reason.BUDGET:
                continue  # launched when due: the next attempt, or when its budget admits it
            if record.state is RunState.CREATED:
                never_launched.append(record.uid)
            else:
                self.recorder.write(
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
        recorded = self.shared.store.known(existing)
        orphans = [uid for uid in existing if uid and uid not in recorded]
        delete = self.shared.settings.service.orphan_pods == "delete"
        for uid in orphans:
            log.warning(
                "objects of unknown run %s: %s%s",
                uid,
                ", ".join(existing[uid]),
                " - deleting" if delete else "",
            )
            if delete:
                self.shared.runtime.abort(
                    uid, Reason.ORPHAN, "a pod of a run unknown to the service"
                )
        return Reconciliation(self.relaunch(never_launched), lost, orphans)

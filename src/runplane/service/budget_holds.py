"""Runs a project's budget holds: recorded ``pending`` (reason ``Budget``), never handed to the
runtime, and launched once the budget admits them: the period rolled over, an admin raised or
cleared the budget, or changed its action.

The monitor asks every :data:`RECHECK` seconds, and the service at once after a budget
changes. Each held run is taken by one conditional update (still pending, still held, not
being aborted), so two askers never launch it twice.
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import Connection, select, update

from runplane.runs import Reason, RunRecord, RunState
from runplane.service.budgets import Budgets, Decision, Verdict
from runplane.service.db.models import ATTEMPTS, HELD_BY_BUDGET, RUNS
from runplane.service.db.rows import oldest_first
from runplane.service.launcher import Launcher
from runplane.service.shared import Shared
from runplane.spec.function import Function
from runplane.spec.scheduling import PreemptionMode, check_preemption_mode
from runplane.spec.thresholds import threshold_seconds

log = logging.getLogger(__name__)

#: Seconds between the monitor's looks at the held runs (a period's rollover is seen this
#: late at most; a budget changed through this process is acted on at once).
RECHECK = 5.0
#: What a held run's status says once its budget let it go, until the runtime says more.
ADMITTED = "the project's budget admits it now; starting"


def held_runs(connection: Connection, runtime: str, executor: int | None) -> list[str]:
    """The runs a budget holds of ``runtime`` and ``executor`` (``None``: a cluster's, which
    have no executor process), oldest first: read from their own partial index."""
    query = select(RUNS.c.uid, RUNS.c.created_at).where(
        HELD_BY_BUDGET,
        RUNS.c.runtime == runtime,
        ~RUNS.c.abort_requested,
        RUNS.c.executor_pid.is_(None) if executor is None else RUNS.c.executor_pid == executor,
    )
    held = connection.execute(query).all()
    return oldest_first(held)


def mode_of(record: RunRecord) -> PreemptionMode | None:
    """The preemption mode the run's first attempt was recorded with (``None``: none)."""
    first = next((a for a in record.attempts if a.number == 1), None)
    mode = first.preemption_mode if first is not None else ""
    return check_preemption_mode("preemption_mode", mode) if mode else None


def spot_only(fn: Function) -> Function:
    """A copy of ``fn`` constrained to spot nodes, as a ``spot-only`` budget admits it; ``fn``
    stays as it was (a submission's function may be shared by others, see
    :class:`~runplane.service.routes.submissions.FunctionsRead`)."""
    return fn.model_copy(deep=True).with_preemption_mode(PreemptionMode.CONSTRAIN.value)


class BudgetHolds:
    def __init__(
        self, shared: Shared, launcher: Launcher, budgets: Budgets, executor: int | None
    ) -> None:
        self.shared = shared
        #: The process whose runs these are (``None``: a durable runtime's, anyone's): a
        #: command that changes a budget on the embedded default's store launches none of the
        #: runs another process holds.
        self.executor = executor
        self.launcher = launcher
        self.budgets = budgets
        #: Whether a look may find held runs: set by a hold, and at the start (a previous
        #: process may have left some); a look that finds none and no budget clears it, so a
        #: service without budgets reads nothing.
        self.may_hold = True

    def held(self) -> list[str]:
        """This runtime's held runs, oldest first."""
        with self.shared.store.engine.connect() as connection:
            return held_runs(connection, self.shared.runtime.name, self.executor)

    def release(self) -> list[str]:
        """Launch the held runs their project's budget admits now; returns their uids."""
        if not self.may_hold and not self.budgets.all():
            return []
        uids = self.held()
        self.may_hold = bool(uids) or bool(self.budgets.all())
        released = []
        for uid in uids:
            try:
                record = self.shared.store.get(uid)
                decision = self.budgets.decide(record.project, mode_of(record))
                if decision.verdict is Verdict.HOLD:
                    self._restate(record, decision.text)
                elif self._take(record, decision):
                    released.append(uid)
                    self._launch(record)
            except Exception:
                log.exception("run %s: letting its budget's hold go failed", uid)
        if released:
            self.shared.feed.publish(released)
        return released

    def _restate(self, record: RunRecord, text: str) -> None:
        """Keep a held run's status saying what its project spent now."""
        if record.status_text == text:
            return
        with self.shared.store.engine.begin() as connection:
            connection.execute(
                update(RUNS)
                .where(RUNS.c.uid == record.uid, RUNS.c.reason == Reason.BUDGET.value)
                .values(status_text=text)
            )
        self.shared.feed.publish([record.uid])

    def _take(self, record: RunRecord, decision: Decision) -> bool:
        """Mark the run no longer held, if it still is; ``False`` if another asker took it,
        or it was aborted meanwhile."""
        now = time.time()
        released: dict[str, object] = {"reason": "", "status_text": ADMITTED, "updated_at": now}
        if decision.verdict is Verdict.SPOT:
            # recorded as submit records it, so a relaunch after a restart stays on spot
            released["function"] = spot_only(Function.from_dict(record.function)).to_dict()
        with self.shared.store.engine.begin() as connection:
            taken = connection.execute(
                update(RUNS)
                .where(
                    RUNS.c.uid == record.uid,
                    RUNS.c.state == RunState.PENDING.value,
                    RUNS.c.reason == Reason.BUDGET.value,
                    ~RUNS.c.abort_requested,
                )
                .values(**released)
            )
            if taken.rowcount != 1:
                return False
            first: dict[str, object] = {"launched_at": now, "adjustments": decision.text}
            if decision.verdict is Verdict.SPOT:
                first["preemption_mode"] = PreemptionMode.CONSTRAIN.value
            connection.execute(
                update(ATTEMPTS)
                .where(ATTEMPTS.c.run_uid == record.uid, ATTEMPTS.c.number == 1)
                .values(**first)
            )
        return True

    def _launch(self, record: RunRecord) -> None:
        live = self.shared.live
        thresholds = threshold_seconds(record.thresholds)
        if live.waiter(record.uid) is None:
            live.hold(record.uid, thresholds)
        else:
            with live.lock:
                live.clocks.track(record.uid, thresholds)
        record = self.shared.store.get(record.uid)  # as released: spot-only if so decided
        try:
            request = self.launcher.request_of(record)
            self.shared.runtime.check(request)
        except Exception as error:
            self.launcher.failed(record.uid, record.attempt, f"the run could not start: {error}")
            return
        self.launcher.arm_spot_wait(record, Function.from_dict(record.function))
        self.launcher.launch(request)

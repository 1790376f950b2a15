"""Spend budgets per project: how much a project may spend in a day, a week or a month, in the
currency of the node-group prices (``service.node_groups``), and what its new runs meet at the
limit.

A project's spend in a period is the realised cost (:mod:`runplane.service.costs`) of its runs'
attempts for the part of their time that falls inside the period: a run that straddles the
start of a month pays into both months, a running attempt counts what it has cost so far
(until now), and an attempt resized in place pays each interval at the requests in force
during it, so a run grown past its first size spends the budget at its new size. Periods begin
at midnight UTC: a day at 00:00, a week on Monday 00:00, a month on its first day 00:00,
whatever the service's own time zone.

At the limit (spent >= amount) the budget's action decides what a new run meets; running work
is never stopped by a budget, and a retry of a run already admitted is not held either:

- ``warn``: it starts; the warning is recorded on its first attempt and shown wherever the
  project's spend is.
- ``hold``: it is recorded ``pending`` (reason ``Budget``) with the spend in its status text,
  and launched when the period rolls over, the budget is raised or cleared.
- ``spot-only``: it starts only on spot nodes. A run whose preemption mode is ``allow`` is
  constrained to spot (noted on its attempt); ``constrain`` starts as it is; ``prevent`` or
  ``none`` (it asked never to be preempted) is held as ``hold`` holds, saying why.
"""

from __future__ import annotations

import datetime
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import Engine, delete, or_, select
from sqlalchemy.exc import IntegrityError

from runplane.config import Settings
from runplane.errors import InvalidValueError
from runplane.runs import ResizeRecord
from runplane.service import resizes
from runplane.service.costs import attempt_cost, configured
from runplane.service.db import session_factory
from runplane.service.db.models import ATTEMPTS, RESIZES, RUNS, ProjectBudget
from runplane.spec.numbers import is_decimal
from runplane.spec.scheduling import PreemptionMode

#: Resized runs whose resizes one statement reads (a bound on its parameters: PostgreSQL's
#: protocol takes at most 65,535).
_RESIZED_PER_READ = 1000
#: The largest amount a budget takes (a bound, not a policy).
MAX_AMOUNT = 1e12
#: Seconds a process keeps the budgets it read before reading them again (another process,
#: a replica or ``runplane project budget`` on the embedded default's store, may change them).
REFRESH = 10.0
#: Seconds a project's spend is reused for the admissions that follow: a burst of runs of a
#: budgeted project costs one read of its attempts, not one each (admission may overshoot a
#: budget by what the project spends in that time, as it may by the runs already running).
SPEND_KEPT = 2.0
_E = TypeVar("_E", bound=StrEnum)
EXAMPLE = "{'amount': 500, 'period': 'month', 'action': 'hold'}"
FIELDS = ("amount", "period", "action")


class Period(StrEnum):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"

    @property
    def words(self) -> str:
        """How a sentence names the period now running."""
        return "today" if self is Period.DAY else f"this {self.value}"


class Action(StrEnum):
    """What a project's new runs meet once it spent its budget."""

    WARN = "warn"
    HOLD = "hold"
    SPOT_ONLY = "spot-only"


def period_bounds(period: Period, now: float) -> tuple[float, float]:
    """The UTC period that holds ``now``: its start and the next period's start."""
    at = datetime.datetime.fromtimestamp(now, datetime.UTC)
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if period is Period.DAY:
        start, end = day, day + datetime.timedelta(days=1)
    elif period is Period.WEEK:
        start = day - datetime.timedelta(days=day.weekday())
        end = start + datetime.timedelta(days=7)
    else:
        start = day.replace(day=1)
        end = (start + datetime.timedelta(days=32)).replace(day=1)
    return start.timestamp(), end.timestamp()


@dataclass(frozen=True, slots=True)
class Budget:
    project: str
    amount: float
    period: Period
    action: Action
    updated_at: float = 0.0
    updated_by: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "amount": self.amount,
            "period": self.period.value,
            "action": self.action.value,
            "updated_at": self.updated_at,
            "updated_by": self.updated_by,
        }


def amount_text(amount: float) -> str:
    """An amount as a person wrote it: ``500``, ``12.5``."""
    return f"{amount:.2f}".rstrip("0").rstrip(".")


def parse_amount(field: str, value: object) -> float:
    """A budget's amount: a number from 0 to :data:`MAX_AMOUNT`, given as a number or as
    ASCII digits (other scripts' digits, separators and units are refused)."""
    allowed = (
        f"a number from 0 to {amount_text(MAX_AMOUNT)} in ASCII digits, in the node-group "
        "prices' currency"
    )
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidValueError(field, value, allowed, "500")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 32 or not is_decimal(text):
            raise InvalidValueError(field, value, allowed, "500")
        number = float(text)
    else:
        number = float(value)
    if not math.isfinite(number) or not 0 <= number <= MAX_AMOUNT:
        raise InvalidValueError(field, value, allowed, "500")
    return round(number, 6)


def _choice(kind: type[_E], field: str, value: object, example: str) -> _E:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return kind(value.strip().lower())
    except ValueError:
        raise InvalidValueError(
            field, value, f"one of {', '.join(m.value for m in kind)}", example
        ) from None


def check_budget(project: str, values: Mapping[str, Any]) -> Budget:
    """A budget from what a caller sent: ``amount`` (required), ``period`` (``month`` unless
    given) and ``action`` (``warn`` unless given); anything else is refused by name."""
    for key in values:
        if key not in FIELDS:
            raise InvalidValueError(key, values[key], "a budget has " + ", ".join(FIELDS), EXAMPLE)
    if values.get("amount") is None:
        raise InvalidValueError("amount", None, "a budget needs an amount", EXAMPLE)
    return Budget(
        project,
        parse_amount("amount", values["amount"]),
        _choice(Period, "period", values.get("period") or "month", "'month'"),
        _choice(Action, "action", values.get("action") or "warn", "'hold'"),
    )


def _budget(row: ProjectBudget) -> Budget:
    return Budget(
        row.project,
        row.amount,
        Period(row.period),
        Action(row.action),
        row.updated_at,
        row.updated_by,
    )


@dataclass(frozen=True, slots=True)
class Standing:
    """A budget against what its project spent in the period running at ``at``."""

    budget: Budget
    spent: float
    start: float
    end: float
    at: float

    @property
    def reached(self) -> bool:
        return self.spent >= self.budget.amount

    @property
    def text(self) -> str:
        """``budget: project team-a spent 498.70 of 500 this month``."""
        return (
            f"budget: project {self.budget.project} spent {self.spent:.2f} of "
            f"{amount_text(self.budget.amount)} {self.budget.period.words}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "budget": self.budget.to_json(),
            "spent": round(self.spent, 6),
            "period_start": self.start,
            "period_end": self.end,
            "reached": self.reached,
            "text": self.text,
        }


class Verdict(StrEnum):
    ADMIT = "admit"
    WARN = "warn"
    #: Admitted, constrained to spot nodes.
    SPOT = "spot"
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class Decision:
    """What a new run of a project meets: its verdict and the words recorded with it (the
    held run's status text, or the note on an admitted run's attempt)."""

    verdict: Verdict = Verdict.ADMIT
    text: str = ""


ADMIT = Decision()


def decide(standing: Standing | None, mode: PreemptionMode | None) -> Decision:
    """The verdict for a new run of ``mode`` under its project's ``standing``."""
    if standing is None or not standing.reached:
        return ADMIT
    action, text = standing.budget.action, standing.text
    if action is Action.WARN:
        return Decision(Verdict.WARN, f"{text} (warn: runs still start)")
    if action is Action.HOLD:
        return Decision(Verdict.HOLD, text)
    if mode is PreemptionMode.CONSTRAIN:
        return Decision(Verdict.ADMIT, f"{text} (spot-only: this run runs on spot nodes)")
    if mode is PreemptionMode.ALLOW:
        return Decision(Verdict.SPOT, f"{text} (spot-only: constrained to spot nodes)")
    said = mode.value if mode is not None else "none"
    return Decision(
        Verdict.HOLD,
        f"{text}; only spot runs start and this run's preemption mode ({said}) keeps it off "
        "spot nodes",
    )


class Budgets:
    """The projects' budgets in the service's database, and what each project spent."""

    def __init__(
        self,
        engine: Engine,
        settings: Callable[[], Settings],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._engine = engine
        self._sessions = session_factory(engine)
        self._settings = settings
        #: What the periods and the spend so far are read against (tests set one).
        self.clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, Budget] = {}
        self._read_at: float | None = None
        #: Bumped by each change: a read that began before one does not keep what it read.
        self._generation = 0
        #: Each project's last spend: (its budget, the period's start, when read, the spend).
        self._spent: dict[str, tuple[Budget, float, float, float]] = {}

    # -- the budgets ----------------------------------------------------------------------

    def all(self) -> dict[str, Budget]:
        """Every project's budget, as read at most :data:`REFRESH` seconds ago (a project
        without one costs no statement on a run's path)."""
        with self._lock:
            fresh = self._read_at is not None and time.monotonic() - self._read_at < REFRESH
            if fresh:
                return dict(self._cache)
            generation = self._generation
        with self._sessions() as session:
            budgets = {row.project: _budget(row) for row in session.scalars(select(ProjectBudget))}
        with self._lock:
            if generation == self._generation:
                self._cache, self._read_at = budgets, time.monotonic()
        return dict(budgets)

    def get(self, project: str) -> Budget | None:
        return self.all().get(project)

    def set(self, budget: Budget, by: str) -> Budget:
        """Store ``budget`` as its project's (replacing the one it had)."""
        now = time.time()
        for last in (False, True):  # a budget another caller stored meanwhile is replaced
            try:
                with self._sessions.begin() as session:
                    row = session.get(ProjectBudget, budget.project)
                    if row is None:
                        row = ProjectBudget(project=budget.project)
                        session.add(row)
                    row.amount, row.period = budget.amount, budget.period
                    row.action, row.updated_at, row.updated_by = budget.action, now, by
                break
            except IntegrityError:
                if last:
                    raise
        self._forget()
        return Budget(budget.project, budget.amount, budget.period, budget.action, now, by)

    def clear(self, project: str) -> bool:
        """Drop the project's budget; ``False`` if it had none."""
        with self._sessions.begin() as session:
            gone = session.execute(delete(ProjectBudget).where(ProjectBudget.project == project))
        self._forget()
        return bool(getattr(gone, "rowcount", 0))

    def _forget(self) -> None:
        with self._lock:
            self._generation += 1
            self._read_at = None
            self._spent.clear()

    # -- spend ----------------------------------------------------------------------------

    def spent(self, project: str, start: float, end: float) -> float:
        """What the project's runs' attempts cost between ``start`` and ``end`` (a running
        attempt until ``end``); attempts on a group with no price cost nothing known. The
        resizes of the runs that had some are read in one statement more."""
        prices, _ = configured(self._settings())
        if not prices:
            return 0.0
        query = (
            select(
                RUNS.c.uid,
                RUNS.c.resized,
                ATTEMPTS.c.number,
                ATTEMPTS.c.started_at,
                ATTEMPTS.c.ended_at,
                ATTEMPTS.c.node_group,
                ATTEMPTS.c.requests,
                RUNS.c.requests,
                RUNS.c.ended_at,
            )
            .join(RUNS, RUNS.c.uid == ATTEMPTS.c.run_uid)
            .where(
                RUNS.c.project == project,
                or_(RUNS.c.ended_at.is_(None), RUNS.c.ended_at > start),
                ATTEMPTS.c.started_at.is_not(None),
                ATTEMPTS.c.started_at < end,
                or_(ATTEMPTS.c.ended_at.is_(None), ATTEMPTS.c.ended_at > start),
            )
        )
        total = 0.0
        with self._engine.connect() as connection:
            rows = connection.execute(query).all()
            grown = sorted({row[0] for row in rows if row[1] and row[5] in prices})
            changes: dict[tuple[str, int], list[ResizeRecord]] = {}
            for first in range(0, len(grown), _RESIZED_PER_READ):
                applied = (
                    select(RESIZES)
                    .where(
                        RESIZES.c.run_uid.in_(grown[first : first + _RESIZED_PER_READ]),
                        RESIZES.c.outcome == "applied",
                    )
                    .order_by(RESIZES.c.id)
                )
                found = connection.execute(applied).all()
                for row, change in zip(found, resizes.records(found), strict=True):
                    changes.setdefault((row.run_uid, row.attempt), []).append(change)
        for uid, _, number, began, ended, group, asked, run_asked, run_ended in rows:
            price = prices.get(group or "")
            if price is None:
                continue
            # An attempt whose end was never recorded stops paying when its run ended.
            stop = min(ended or run_ended or end, end)
            total += attempt_cost(
                price,
                asked or run_asked or {},
                began,
                stop,
                changes.get((uid, number), ()),
                since=start,
                until=end,
            )
        return total

    def standing(self, project: str, budget: Budget | None = None) -> Standing | None:
        """The project's budget against its spend in the period running now; ``None``
        without a budget."""
        budget = budget or self.get(project)
        if budget is None:
            return None
        now = self.clock()
        start, end = period_bounds(budget.period, now)
        with self._lock:
            kept, generation = self._spent.get(project), self._generation
        fresh = (
            kept is not None
            and kept[:2] == (budget, start)
            and time.monotonic() - kept[2] < SPEND_KEPT
        )
        if kept is not None and fresh:
            spent = kept[3]
        else:
            spent = self.spent(project, start, min(now, end))
            with self._lock:
                if generation == self._generation:
                    self._spent[project] = (budget, start, time.monotonic(), spent)
        return Standing(budget, spent, start, end, now)

    def reached(self) -> list[Standing]:
        """The standings of the projects that reached their budget, by project."""
        standings = (self.standing(name, budget) for name, budget in sorted(self.all().items()))
        return [s for s in standings if s is not None and s.reached]

    def decide(self, project: str, mode: PreemptionMode | None) -> Decision:
        """What a new run of ``project`` in preemption ``mode`` meets now."""
        budget = self.get(project)
        if budget is None:
            return ADMIT
        return decide(self.standing(project, budget), mode)

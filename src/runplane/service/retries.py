"""Whether a failed attempt gets another, when, and what the next one changes.

Pure and runtime-agnostic: :func:`decide` reads the run's record and how its attempt ended and
answers with a :class:`RetryDecision` (or why not); the service records the decision before it
launches anything (``RunStore.apply_many``), and launches the attempt when it is due
(``RunService``), through the same :func:`~runplane.runtimes.request.build_request` as every
other attempt, on whichever runtime. What an attempt changes of its function (preemption mode
``prevent`` after the spot fallback, more memory after an OOM kill) is an :class:`AttemptPlan`,
applied to a copy of the function before it is built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.config import Settings
from runplane.errors import RunplaneError
from runplane.rendering.preemption import check_selector_conflict
from runplane.rendering.resources import Quantities, effective_mode
from runplane.runs import AttemptRecord, FailureClass, Reason, RunRecord
from runplane.runtimes.events import RunEvent
from runplane.spec.durations import NEVER, parse_duration
from runplane.spec.function import Function
from runplane.spec.quantity import MEBIBYTE, mebibytes, parse_quantity, whole_bytes
from runplane.spec.retries import RetryPolicy, check_delay, overlay
from runplane.spec.scheduling import PreemptionMode

#: Classes that count as a preemption for the spot fallback.
PREEMPTIONS = frozenset({FailureClass.PREEMPTED, FailureClass.NODE_LOST})
_SPOT_MODES = frozenset({PreemptionMode.ALLOW.value, PreemptionMode.CONSTRAIN.value})


@dataclass(frozen=True, slots=True)
class Policy:
    """A run's retry policy resolved: the function's, over the service's defaults, capped by
    the admin's limits; times in seconds (``None``: never)."""

    max_attempts: int
    on: frozenset[FailureClass]
    backoff: float
    backoff_factor: float
    max_backoff: float
    budgets: Mapping[FailureClass, int]
    deadline: float | None
    memory_factor: float
    fallback_after: int
    fallback_pending: float | None
    max_memory: int | None

    def delay(self, retry: int) -> float:
        """The wait before retry number ``retry`` (1 for the second attempt)."""
        return min(self.backoff * self.backoff_factor ** (retry - 1), self.max_backoff)


def _span(value: Any) -> float | None:
    seconds = parse_duration("retry", value) if value is not None else NEVER
    return None if seconds == NEVER else seconds


def resolve(function: Function, settings: Settings) -> Policy:
    """The policy a run of ``function`` gets under ``settings``."""
    spec = function.spec
    own = spec.retry
    if spec.retries and (own is None or own.max_attempts is None):
        own = overlay(own or RetryPolicy(), RetryPolicy(max_attempts=spec.retries + 1))
    policy = overlay(settings.function_defaults.retry, own)
    limits = settings.retry_limits
    fallback = policy.spot_fallback
    minimum = check_delay("retry_limits.min_backoff", limits.min_backoff)
    max_memory = (
        whole_bytes(parse_quantity("retry_limits.max_memory", limits.max_memory, "memory"))
        if limits.max_memory
        else None
    )
    return Policy(
        max_attempts=min(policy.max_attempts or 1, limits.max_attempts),
        on=frozenset(policy.on or ()),
        backoff=max(check_delay("retry.backoff", policy.backoff or 0), minimum),
        backoff_factor=policy.backoff_factor or 1.0,
        # A back-off asked for is never cut short by a default cap below it.
        max_backoff=max(
            check_delay("retry.max_backoff", policy.max_backoff or 0),
            check_delay("retry.backoff", policy.backoff or 0),
            minimum,
        ),
        budgets=dict(policy.budgets or {}),
        deadline=_span(policy.deadline),
        memory_factor=policy.memory_factor or 1.0,
        fallback_after=(fallback.after_preemptions or 0) if fallback else 0,
        fallback_pending=_span(fallback.pending) if fallback else None,
        max_memory=max_memory,
    )


@dataclass(frozen=True, slots=True)
class AttemptPlan:
    """How an attempt runs its function: the preemption mode and memory it was given (the
    spot fallback and OOM growth change them); empty fields keep the function's."""

    preemption_mode: str = ""
    memory_request: str = ""
    memory_limit: str = ""

    @classmethod
    def of(cls, attempt: AttemptRecord) -> AttemptPlan:
        """The plan an attempt was recorded with: its mode, memory request and limit."""
        return cls(
            preemption_mode=attempt.preemption_mode,
            memory_request=str(attempt.requests.get("memory", "")),
            memory_limit=str(attempt.limits.get("memory", "")),
        )

    def apply(self, function: Function) -> Function:
        """A copy of ``function`` as this attempt runs it."""
        changed = Function.from_dict(function.to_dict())
        for name, values in function.held_secrets.items():
            changed.hold_secret(name, values)
        if self.preemption_mode:
            changed.with_preemption_mode(self.preemption_mode)
        # Memory only grows between attempts: the limit first, so the request stays below it.
        if self.memory_limit:
            changed.with_limits(mem=self.memory_limit, patch=True)
        if self.memory_request:
            changed.with_requests(mem=self.memory_request, patch=True)
        return changed


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """Another attempt, decided: its number, when it is due, and how it runs."""

    attempt: int
    due_at: float
    plan: AttemptPlan
    requests: dict[str, Any]
    limits: dict[str, Any]
    preemption_mode: str
    #: Why its placement or resources differ from the previous attempt's.
    adjustments: str
    #: The run's status text while it waits.
    message: str
    failure: FailureClass = FailureClass.ERROR


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _resized(
    record: RunRecord, number: int, requests: dict[str, Any], limits: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The memory the attempt really had: its limit as live right-sizing last raised it in
    place (an OOM kill past it grows from there), its request by as much."""
    applied = [
        r.memory_to
        for r in record.resizes
        if r.attempt == number and r.applied and r.memory_to is not None
    ]
    before = Quantities.of(limits).memory
    if not applied or before is None or applied[-1] == before:
        return requests, limits, ""
    after = applied[-1]
    grown_requests, grown_limits = dict(requests), {**limits, "memory": mebibytes(after, up=True)}
    asked = Quantities.of(requests).memory
    if asked is not None:
        grown_requests["memory"] = mebibytes(max(asked + after - before, 1), up=True)
    why = f"memory limit {grown_limits['memory']} as resized in place"
    return grown_requests, grown_limits, why


def _asked(
    record: RunRecord,
    number: int,
    requests: dict[str, Any],
    limits: dict[str, Any],
    largest: Callable[[], int | None],
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """At least the memory live right-sizing asked for and the node could not grant in
    place (a ``fallback``): the next attempt starts with it, as far as the largest node
    holds it."""
    wanted = [
        r.memory_to
        for r in record.resizes
        if r.attempt == number and r.outcome == "fallback" and r.memory_to is not None
    ]
    now = Quantities.of(limits).memory
    if not wanted or now is None or max(wanted) <= now:
        return requests, limits, ""
    most = largest()
    after = min(max(wanted), most) if most else max(wanted)
    if after <= now:
        return requests, limits, ""
    text = mebibytes(after, up=True)
    grown_requests = dict(requests)
    asked = Quantities.of(requests).memory
    if asked is not None:  # by as much as the limit
        grown_requests["memory"] = mebibytes(asked + after - now, up=True)
    why = (
        f"memory limit {text}, the size live right-sizing asked for and the node could not "
        "grant in place"
    )
    return grown_requests, {**limits, "memory": text}, why


def _grow_memory(
    requests: dict[str, Any],
    limits: dict[str, Any],
    policy: Policy,
    largest: Callable[[], int | None],
) -> tuple[dict[str, Any], dict[str, Any], str] | str:
    """Requests and limits with more memory after an OOM kill, and why; or why not."""
    if policy.memory_factor <= 1:
        return requests, limits, ""
    caps = [cap for cap in (policy.max_memory, largest()) if cap]
    cap = min(caps) if caps else None
    grown_requests, grown_limits = dict(requests), dict(limits)
    changes = []
    for name, values, grown in (
        ("limit", limits, grown_limits),
        ("request", requests, grown_requests),
    ):
        before = Quantities.of(values).memory
        if before is None:
            continue
        after = math.ceil(before * policy.memory_factor / MEBIBYTE) * MEBIBYTE
        if cap is not None:
            after = min(after, cap)
        if name == "limit" and after <= before:
            most = mebibytes(cap or before, up=True)
            return (
                f"its memory limit {values['memory']} is already the most an attempt may get "
                f"({most}: the largest node's allocatable or retry_limits.max_memory)"
            )
        if after > before:
            grown["memory"] = mebibytes(after, up=True)
            changes.append(f"memory {name} {values['memory']} -> {grown['memory']}")
    if not changes:
        return requests, limits, ""
    return (
        grown_requests,
        grown_limits,
        f"{', '.join(changes)} (x{policy.memory_factor:g} after an OOM kill)",
    )


def _fallback(
    record: RunRecord,
    failure: FailureClass,
    reason: str,
    mode: str,
    policy: Policy,
    settings: Settings,
) -> tuple[str, str]:
    """The next attempt's preemption mode, and why it changed (empty when it did not)."""
    if mode not in _SPOT_MODES:
        return mode, ""
    ends = [(a.failure, a.spot) for a in record.attempts if a.number < record.attempt]
    current = next((a for a in record.attempts if a.number == record.attempt), None)
    ends.append((failure.value, current.spot if current else None))
    preemptions = sum(1 for end, spot in ends if end in PREEMPTIONS and spot is not False)
    if reason == Reason.SPOT_UNAVAILABLE:
        why = "no spot node was found in time (retry.spot_fallback.pending)"
    elif policy.fallback_after and preemptions >= policy.fallback_after:
        why = (
            f"preempted {preemptions} time{'s' if preemptions != 1 else ''} on spot "
            f"(retry.spot_fallback.after_preemptions={policy.fallback_after})"
        )
    else:
        return mode, ""
    selector = {
        **settings.function_defaults.node_selector,
        **(record.function.get("spec", {}).get("node_selector") or {}),
    }
    try:
        check_selector_conflict(PreemptionMode.PREVENT, selector, settings.spot)
    except RunplaneError:
        return mode, f"stays on spot although {why}: its node selector asks for spot nodes"
    return PreemptionMode.PREVENT.value, f"on-demand nodes (mode prevent): {why}"


def decide(
    record: RunRecord,
    end: RunEvent,
    settings: Settings,
    now: float,
    largest_memory: Callable[[], int | None] = lambda: None,
) -> tuple[RetryDecision | None, str]:
    """Whether the run's current attempt, which ``end`` ended (classified: its ``failure``
    is set), gets another; with ``None``, why not (empty when retries were not asked for).

    ``largest_memory`` is asked only after an OOM kill: the largest node's allocatable memory
    in bytes (``None``: unknown).
    """
    failure, reason, message = end.failure, end.reason, end.message
    if failure is None or failure is FailureClass.ABORTED:
        return None, ""
    function = Function.from_dict(record.function)
    policy = resolve(function, settings)
    number = record.attempt
    spot_wait = reason == Reason.SPOT_UNAVAILABLE
    asked = policy.max_attempts > 1
    if not spot_wait and failure not in policy.on:
        return None, (f"not retried: retry.on does not name {failure.value}" if asked else "")
    if number >= policy.max_attempts:
        return None, (
            f"attempt {number} of {policy.max_attempts}: no attempts left" if asked else ""
        )
    failures = [a.failure for a in record.attempts if a.number < number] + [failure.value]
    budget = policy.budgets.get(failure)
    if budget is not None and failures.count(failure.value) > budget:
        return None, f"not retried: the retry budget for {failure.value} ({budget}) is spent"
    due = now + policy.delay(number)
    if policy.deadline is not None and due > record.created_at + policy.deadline:
        return None, "not retried: the next attempt would start after retry.deadline"
    current = next((a for a in record.attempts if a.number == number), None)
    requests = dict(current.requests if current and current.requests else record.requests)
    limits = dict(current.limits if current and current.limits else record.limits)
    mode = current.preemption_mode if current and current.preemption_mode else ""
    mode, placement = _fallback(
        record, failure, reason, mode or effective_mode(function, settings).value, policy, settings
    )
    adjustments = [placement] if placement else []
    if failure is FailureClass.OOM:
        requests, limits, resized = _resized(record, number, requests, limits)
        adjustments += [resized] if resized else []
        grown = _grow_memory(requests, limits, policy, largest_memory)
        if isinstance(grown, str):
            return None, f"not retried: {grown}"
        requests, limits, why = grown
        adjustments += [why] if why else []
        requests, limits, larger = _asked(record, number, requests, limits, largest_memory)
        adjustments += [larger] if larger else []
    plan = AttemptPlan(
        preemption_mode=mode,
        memory_request=str(requests.get("memory", "")),
        memory_limit=str(limits.get("memory", "")),
    )
    delay = due - now
    wait = f"in {_duration(delay)}" if delay >= 0.05 else "now"
    text = f"attempt {number + 1} of {policy.max_attempts} starts {wait}: attempt {number} " + (
        f"ended {failure.value}" + (f" ({message})" if message else "")
    )
    if adjustments:
        text += "; next attempt: " + "; ".join(adjustments)
    return (
        RetryDecision(
            attempt=number + 1,
            due_at=due,
            plan=plan,
            requests=requests,
            limits=limits,
            preemption_mode=mode,
            adjustments="; ".join(adjustments),
            message=text,
            failure=failure,
        ),
        "",
    )

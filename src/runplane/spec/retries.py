"""How a function's runs survive failures: which failed attempts are tried again, how soon, how
often, and what the next attempt changes (on-demand after spot preemptions, more memory after
an OOM kill).

A function sets only what it cares about (``fn.with_retries(...)``, ``fn.with_spot_fallback
(...)``, or the shorthand ``spec.retries = N``); every field it leaves unset comes from the
service's ``function_defaults.retry``, and an admin's ``retry_limits`` caps the result. The
service resolves and applies the policy (``service/retries.py``); this module only says what a
valid policy is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pydantic

from runplane.errors import InvalidValueError
from runplane.runs import RETRYABLE, FailureClass
from runplane.spec.base import SpecModel, checked, translate
from runplane.spec.durations import NEVER, parse_duration
from runplane.spec.resources import check_quantity_setting

#: The most attempts any policy may ask for; an admin's ``retry_limits`` usually caps lower.
MAX_ATTEMPTS = 100
#: The longest back-off between two attempts.
MAX_BACKOFF_SECONDS = 86400.0

Delay = str | int | float


def check_delay(field: str, value: object, example: str = "'10s'") -> float:
    """Seconds in a back-off: a duration (``'10s'``, ``'1 minute'``) or a number of seconds,
    zero allowed (try again at once)."""
    if isinstance(value, bool):
        raise InvalidValueError(field, value, "a duration such as '10s', or seconds", example)
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and value.strip() in ("0", "0s"):
        seconds = 0.0
    else:
        seconds = parse_duration(field, value)
    if not 0 <= seconds <= MAX_BACKOFF_SECONDS:
        raise InvalidValueError(field, value, "a back-off is between 0 seconds and 1 day", example)
    return seconds


def check_span(field: str, value: object) -> float:
    """Seconds in a duration that may be ``-1`` (never)."""
    return parse_duration(field, value) if value != NEVER else float(NEVER)


def check_classes(field: str, value: object) -> list[FailureClass]:
    """Failure classes a policy retries: any but ``aborted`` (a person's decision)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple | set | frozenset):
        raise InvalidValueError(
            field, value, "a list of failure classes", "on=('preempted', 'node_lost')"
        )
    items: Iterable[object] = value
    classes: list[FailureClass] = []
    for item in items:
        failure = FailureClass.named(field, item)
        if failure not in RETRYABLE:
            raise InvalidValueError(
                field,
                item,
                "an aborted run is never retried (a person stopped it); retry one of "
                + ", ".join(sorted(RETRYABLE)),
                "on=('preempted', 'node_lost')",
            )
        if failure not in classes:
            classes.append(failure)
    return classes


class SpotFallback(SpecModel):
    """When a run that may use spot nodes moves to on-demand nodes for its next attempt."""

    field_path = "spec.retry.spot_fallback"

    #: After this many preemptions or node losses on spot nodes the next attempt runs in mode
    #: ``prevent``; 0 never.
    after_preemptions: int | None = pydantic.Field(default=None, ge=0, le=MAX_ATTEMPTS)
    #: An attempt that may run only on spot (mode ``constrain``) and finds no node for longer
    #: than this is stopped, and the next runs in mode ``prevent``; -1 never.
    pending: Delay | None = None

    _pending = checked("pending", by=check_span, optional=True, keep=True)


class RetryPolicy(SpecModel):
    """Which failed attempts get another, and how; every field unset takes the service's."""

    field_path = "spec.retry"

    #: Attempts in all, the first included (1: never retried).
    max_attempts: int | None = pydantic.Field(default=None, ge=1, le=MAX_ATTEMPTS)
    #: The failure classes that get another attempt.
    on: list[FailureClass] | None = None
    #: Wait before the second attempt; each later wait is ``backoff_factor`` times longer, at
    #: most ``max_backoff``.
    backoff: Delay | None = None
    backoff_factor: float | None = pydantic.Field(default=None, ge=1, le=10)
    max_backoff: Delay | None = None
    #: The most retries per class (``{'oom': 2}``), within ``max_attempts``.
    budgets: dict[FailureClass, int] | None = None
    #: No attempt starts later than this after the run was submitted; -1 never.
    deadline: Delay | None = None
    #: An attempt after an OOM kill gets this many times the memory (request and limit); 1
    #: keeps it.
    memory_factor: float | None = pydantic.Field(default=None, ge=1, le=16)
    spot_fallback: SpotFallback | None = None

    _on = checked("on", by=check_classes, optional=True)

    @pydantic.field_validator("budgets", mode="before")
    @classmethod
    def _budgets(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise InvalidValueError(
                "spec.retry.budgets", value, "retries per failure class", "{'oom': 2}"
            )
        budgets = {}
        for key, count in value.items():
            (failure,) = check_classes("spec.retry.budgets", [key])
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise InvalidValueError(
                    f"spec.retry.budgets[{key!r}]",
                    count,
                    "a number of retries, 0 or more",
                    "{'oom': 2}",
                )
            budgets[failure] = count
        return budgets

    _delay = checked("backoff", "max_backoff", by=check_delay, optional=True, keep=True)
    _deadline = checked("deadline", by=check_span, optional=True, keep=True)


#: What a service retries when its configuration says nothing: no retries (a run ends with its
#: first failure, as it always did), and, for functions that ask for retries, the classes a
#: retry can fix without a change to the code.
DEFAULT_POLICY = RetryPolicy(
    max_attempts=1,
    on=[FailureClass.PREEMPTED, FailureClass.NODE_LOST],
    backoff="1s",
    backoff_factor=2.0,
    max_backoff="5m",
    budgets={},
    deadline=NEVER,
    memory_factor=1.5,
    spot_fallback=SpotFallback(after_preemptions=2, pending="10 minutes"),
)


class RetryLimits(pydantic.BaseModel):
    """An admin's caps on every function's retry policy (``retry_limits`` in configuration)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    #: The most attempts a run gets, whatever its function asks.
    max_attempts: int = pydantic.Field(default=10, ge=1, le=MAX_ATTEMPTS)
    #: The most memory an attempt gets after OOM kills (the largest node's allocatable caps it
    #: too); unset: only the node.
    max_memory: str | None = None
    #: The shortest back-off a function may ask for.
    min_backoff: Delay = 0

    _memory = checked("max_memory", by=check_quantity_setting, where="retry_limits", optional=True)
    _backoff = checked("min_backoff", by=check_delay, where="retry_limits", keep=True)


def overlay(base: RetryPolicy, top: RetryPolicy | None) -> RetryPolicy:
    """``base`` with every field ``top`` sets (the spot fallback field by field)."""
    if top is None:
        return base
    changes = {key: value for key, value in top if value is not None and key != "spot_fallback"}
    fallback = base.spot_fallback
    if top.spot_fallback is not None:
        own = {k: v for k, v in top.spot_fallback if v is not None}
        fallback = SpotFallback(**{**(fallback.model_dump() if fallback else {}), **own})
    return base.model_copy(update={**changes, "spot_fallback": fallback})


def patched(policy: RetryPolicy | None, **changes: Any) -> RetryPolicy:
    """``policy`` (or an empty one) with the given fields changed and the others kept; checked
    whole, so a refused change leaves the function as it was."""
    data = policy.model_dump(exclude_none=True) if policy else {}
    fallback = changes.pop("spot_fallback", None)
    data.update({key: value for key, value in changes.items() if value is not None})
    if fallback:
        data["spot_fallback"] = {**data.get("spot_fallback", {}), **fallback}
    try:
        return RetryPolicy.model_validate(data)
    except pydantic.ValidationError as error:
        raise translate(error, prefix=RetryPolicy.field_path) from None

"""MLRun's ``retry=`` of ``fn.run`` and ``run_function``, as runplane's retry policy.

MLRun takes a number of retries (``retry=3``), a dict (``{"count": 3, "backoff":
{"base_delay": "30s"}}``) or its ``Retry`` object with the same two fields. ``count`` counts
retries, not attempts: runplane's ``max_attempts`` is ``count + 1``. MLRun tries a run again
when it failed, whatever made it fail; runplane's nearest classes are the failures of the run
itself: its handler's error, an OOM kill, a preemption and a lost node. Failures that
runplane's state thresholds decide (no node in time, an image that does not pull, a run past
its ``running`` threshold) are aborts in MLRun, never retried, and stay so unless the
function's own policy retries them (``fn.with_retries(on=...)``). ``base_delay`` is the wait
before the second attempt; later waits grow as the function's (or the service's) back-off
says, within ``max_backoff``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.errors import InvalidValueError
from runplane.runs import FailureClass
from runplane.spec.function import Function
from runplane.spec.retries import MAX_ATTEMPTS, check_delay

#: What MLRun's retry retries, in runplane's failure classes.
RETRIED = (FailureClass.ERROR, FailureClass.OOM, FailureClass.PREEMPTED, FailureClass.NODE_LOST)
_EXAMPLE = "retry=3, or retry={'count': 3, 'backoff': {'base_delay': '30s'}}"


def _fields(retry: Any) -> tuple[Any, Any]:
    """``(count, base_delay)`` of an int, a dict or an object with MLRun's fields."""
    if isinstance(retry, int) and not isinstance(retry, bool):
        return retry, None
    if isinstance(retry, str | bytes):
        raise InvalidValueError(
            "retry", retry, "a number of retries, or a dict with count and backoff", _EXAMPLE
        )
    if not isinstance(retry, Mapping):
        to_dict = getattr(retry, "to_dict", None)
        if callable(to_dict):
            retry = to_dict()
        elif hasattr(retry, "count"):
            backoff = getattr(retry, "backoff", None)
            return retry.count, getattr(backoff, "base_delay", backoff)
    if not isinstance(retry, Mapping):
        raise InvalidValueError(
            "retry", retry, "a number of retries, or a dict with count and backoff", _EXAMPLE
        )
    unknown = sorted(set(map(str, retry)) - {"count", "backoff"})
    if unknown:
        raise InvalidValueError(
            f"retry.{unknown[0]}", retry[unknown[0]], "retry has count and backoff", _EXAMPLE
        )
    backoff = retry.get("backoff")
    if isinstance(backoff, Mapping):
        extra = sorted(set(map(str, backoff)) - {"base_delay"})
        if extra:
            raise InvalidValueError(
                f"retry.backoff.{extra[0]}",
                backoff[extra[0]],
                "retry.backoff has base_delay",
                "{'base_delay': '30s'}",
            )
        backoff = backoff.get("base_delay")
    elif backoff is not None and not isinstance(backoff, str | int | float):
        raise InvalidValueError(
            "retry.backoff", backoff, "a dict with base_delay", "{'base_delay': '30s'}"
        )
    return retry.get("count", 1), backoff


def apply_retry(fn: Function, retry: Any) -> Function:
    """``fn`` with MLRun's ``retry`` as its retry policy (``None``: ``fn`` as it is)."""
    if retry is None:
        return fn
    count, base_delay = _fields(retry)
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count < MAX_ATTEMPTS:
        raise InvalidValueError(
            "retry.count",
            count,
            f"a number of retries after the first attempt, 0 to {MAX_ATTEMPTS - 1}",
            _EXAMPLE,
        )
    if base_delay is not None:
        check_delay("retry.backoff.base_delay", base_delay, "'30s'")
    if count == 0:
        return fn.with_retries(max_attempts=1)
    known = list(fn.spec.retry.on or []) if fn.spec.retry else []
    on = [*known, *(failure for failure in RETRIED if failure not in known)]
    return fn.with_retries(
        max_attempts=count + 1,
        on=[failure.value for failure in on],
        backoff=base_delay,
    )

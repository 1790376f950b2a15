"""State thresholds: how long a run may stay in a state before it is aborted.

Values stay as written (``"1 minute and 30s"``) for display and export; they are parsed here
once so that a typo fails at the call, and parsed again to seconds where a monitor needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.errors import InvalidValueError
from runplane.runs import Condition
from runplane.spec.durations import parse_duration

ThresholdValue = str | int

#: The conditions a threshold can be set for, with the documents' defaults.
DEFAULT_THRESHOLDS: dict[str, ThresholdValue] = {
    Condition.PENDING_SCHEDULED.value: "1h",
    Condition.PENDING_NOT_SCHEDULED.value: -1,
    Condition.IMAGE_PULL_BACKOFF.value: "1h",
    Condition.RUNNING.value: "24h",
}


def check_thresholds(field: str, thresholds: object) -> dict[str, ThresholdValue]:
    """Validated thresholds keyed by canonical condition name, values as written."""
    if not isinstance(thresholds, Mapping):
        raise InvalidValueError(
            field,
            thresholds,
            "thresholds are a mapping of state to time",
            "{'pending_not_scheduled': '1 min'}",
        )
    checked: dict[str, ThresholdValue] = {}
    for state, value in thresholds.items():
        condition = Condition.named(f"{field} state", state)
        parse_duration(f"{field}[{state!r}]", value)
        checked[condition.value] = value if isinstance(value, str) else int(value)
    return checked


def threshold_seconds(thresholds: Mapping[str, Any]) -> dict[str, float]:
    """Seconds per state (-1 for never) of already validated thresholds."""
    return {state: parse_duration(state, value) for state, value in thresholds.items()}

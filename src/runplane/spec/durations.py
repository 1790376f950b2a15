"""Human time strings for state thresholds: ``30 minutes 5h 1day``, ``1 minute and 30s``, ``-1``.

The documents write thresholds as sequences of value+unit pairs joined by spaces, commas or
"and". No maintained library parses exactly that grammar (the popular ones either stop at
``1h30m`` or accept free text we would rather refuse), so this is a small strict tokenizer.
"""

from __future__ import annotations

import functools
import re

from runplane.errors import InvalidValueError

#: The value that means "never".
NEVER = -1

_UNIT_SECONDS: dict[str, int] = {}
for _names, _seconds in (
    (("s", "sec", "secs", "second", "seconds"), 1),
    (("m", "min", "mins", "minute", "minutes"), 60),
    (("h", "hr", "hrs", "hour", "hours"), 3600),
    (("d", "day", "days"), 86400),
    (("w", "week", "weeks"), 604800),
):
    for _name in _names:
        _UNIT_SECONDS[_name] = _seconds

_PAIR = re.compile(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]+)", re.ASCII)
_SEPARATOR = re.compile(r"(?:\s|,|\band\b)*")
_DANGLING = re.compile(r"^\s*(?:,|and\b)|(?:,|\band)\s*$")

ALLOWED = (
    "a duration is value+unit pairs (units s, sec, m, min, minute, h, hour, d, day, w, week; "
    "plurals too) joined by spaces, commas or 'and', or -1 for never"
)
EXAMPLE = "'1h', '30 minutes 5h 1day', '1 minute and 30s', -1"


def parse_duration(field: str, value: object) -> float:
    """Seconds in ``value``, or :data:`NEVER`; raises a user error naming ``field``."""
    if isinstance(value, bool):
        raise InvalidValueError(field, value, ALLOWED, EXAMPLE)
    if isinstance(value, int | float):
        if value == NEVER:
            return NEVER
        raise InvalidValueError(field, value, ALLOWED, EXAMPLE)
    if not isinstance(value, str):
        raise InvalidValueError(field, value, ALLOWED, EXAMPLE)
    try:
        return _seconds_in_short(value) if len(value) <= _KEPT_LENGTH else _seconds_in(value)
    except _NotADuration as error:
        raise InvalidValueError(field, value, error.allowed, EXAMPLE) from None


class _NotADuration(Exception):
    def __init__(self, allowed: str = ALLOWED) -> None:
        self.allowed = allowed


def _seconds_in(value: str) -> float:
    """What :func:`parse_duration` reads in a text."""
    text = value.strip()
    if text == "-1":
        return NEVER
    if _DANGLING.search(text):
        raise _NotADuration()
    total = 0.0
    position = 0
    pairs = 0
    while position < len(text):
        pair = _PAIR.match(text, position)
        if pair is None:
            raise _NotADuration()
        unit = pair[2].lower()
        if unit not in _UNIT_SECONDS:
            raise _NotADuration()
        total += float(pair[1]) * _UNIT_SECONDS[unit]
        pairs += 1
        position = _SEPARATOR.match(text, pair.end()).end()  # type: ignore[union-attr]
    if pairs == 0 or total <= 0:
        raise _NotADuration(ALLOWED + "; it must be longer than zero")
    return total


#: Every run's thresholds are read as it is submitted and as it changes state: what the texts
#: read lately give is kept, for texts as short as a threshold is written.
_KEPT_LENGTH = 64
_seconds_in_short = functools.lru_cache(maxsize=1024)(_seconds_in)

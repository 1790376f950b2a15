"""Whole numbers written as text by users (form fields, query strings, headers, flags, YAML),
parsed one way everywhere.

Python's own ``int()`` and ``str.isdigit()`` are too generous for input: ``isdigit`` is true
of ``²`` (which ``int`` then refuses with a ``ValueError`` the caller did not expect), ``int``
reads Arabic-Indic and full-width digits, underscores and surrounding whitespace, and a text of
thousands of digits costs quadratic time before Python's own limit refuses it. Here a number is
ASCII digits with an optional sign, its length is checked before it is converted, and every
refusal is an :class:`~runplane.errors.InvalidValueError` naming the field, the value (cut
short), the range and an example.
"""

from __future__ import annotations

import functools
import re

from runplane.errors import InvalidValueError

_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)


def is_whole(text: str) -> bool:
    """Whether ``text`` is a whole number as runplane reads one: ASCII digits with an optional
    sign, nothing else (no spaces, underscores, other scripts' digits or a newline)."""
    return _WHOLE.fullmatch(text) is not None


def is_decimal(text: str) -> bool:
    """Whether ``text`` is a number as runplane reads a fractional one (seconds in a header):
    ASCII digits, a point, an exponent of at most three digits; ``float()`` alone would also
    take other scripts' digits, underscores, spaces, ``nan`` and ``inf``."""
    return _DECIMAL.fullmatch(text) is not None


def whole_number(
    field: str, value: object, low: int, high: int, example: str = "", allowed: str = ""
) -> int:
    """``value`` as an integer from ``low`` to ``high``: an ``int`` (not a ``bool``), or text
    :func:`is_whole` takes, surrounding spaces allowed. Text longer than the bounds' digits is
    refused before it is converted."""
    allowed = allowed or f"a whole number from {low} to {high}, in ASCII digits"
    example = example or str(max(low, min(high, 1)))
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and is_whole(text := value.strip(" \t")):
        if len(text.lstrip("+-").lstrip("0")) > _digits(max(abs(low), abs(high))):
            raise InvalidValueError(field, value, allowed, example)
        number = int(text)
    else:
        raise InvalidValueError(field, value, allowed, example)
    if not low <= number <= high:
        raise InvalidValueError(field, value, allowed, example)
    return number


@functools.cache
def _digits(bound: int) -> int:
    return len(str(bound))

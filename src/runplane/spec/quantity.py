"""Kubernetes resource quantities (``100m``, ``0.5``, ``1Gi``, ``1e9``), parsed exactly.

Users write quantities the way Kubernetes does and expect the same strictness: ``1g`` is a
typo for ``1G`` or ``1Gi``, not a gigabyte, so it is refused at the call instead of at the
API server minutes later. Values are kept as written for display and normalised to
:class:`~fractions.Fraction` for comparisons, fit checks and QoS.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from runplane.errors import InvalidValueError

#: What the user may pass: Kubernetes accepts numbers and strings for quantities.
QuantityInput = int | float | str

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}

# <sign><number><suffix>, where number is digits, digits.digits, digits. or .digits and the
# suffix is a binary/decimal SI suffix or a decimal exponent (e3, E-2) - the grammar of
# k8s.io/apimachinery's resource.Quantity.
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)

_EXAMPLES = {
    "cpu": "cpu=1, cpu='500m', cpu=0.25",
    "memory": "mem='512Mi', mem='1G', mem='2Gi'",
}


def _allowed(kind: str) -> str:
    return (
        f"a {kind} quantity must be a non-negative number with an optional Kubernetes suffix "
        "(m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e9)"
    )


def parse_quantity(field: str, value: object, kind: str = "cpu") -> Fraction:
    """Parse ``value`` as a Kubernetes quantity, raising a user error that names ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        parsed = None
    else:
        parsed = _parse(value)
    if parsed is None:
        raise InvalidValueError(field, value, _allowed(kind), _EXAMPLES.get(kind, "'1', '1Gi'"))
    return parsed


@lru_cache(maxsize=4096, typed=True)
def _parse(value: int | float | str) -> Fraction | None:
    """The value of a quantity, or ``None`` if it is not one; cached because rendering, QoS and
    lints compare the same few quantities over and over."""
    if isinstance(value, float):
        if not math.isfinite(value) or value < 0:
            return None
        return Fraction(value).limit_denominator(10**9)
    if isinstance(value, int):
        return Fraction(value) if value >= 0 else None
    match = _QUANTITY.match(value)
    if match is None:
        return None
    number = Fraction(match["number"])
    if number < 0:
        return None
    suffix = match["suffix"] or ""
    if suffix[:1] in ("e", "E"):
        return number * Fraction(10) ** int(suffix[1:])
    return number * _SUFFIXES[suffix]


def format_quantity(value: QuantityInput) -> str:
    """Render a validated quantity as the string Kubernetes manifests carry."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def millicores(value: Fraction) -> int:
    """CPU in millicores, rounded up as the API server does for sub-milli values."""
    return math.ceil(value * 1000)


def whole_bytes(value: Fraction) -> int:
    """Memory in bytes, rounded up (a fractional byte still needs a byte)."""
    return math.ceil(value)

"""Kubernetes resource quantities (``100m``, ``0.5``, ``1Gi``, ``1e9``), parsed exactly.

Users write quantities the way Kubernetes does and expect the same strictness: ``1g`` is a
typo for ``1G`` or ``1Gi``, not a gigabyte, so it is refused at the call instead of at the
API server minutes later. Values are kept as written for display and normalised to
:class:`~fractions.Fraction` for comparisons, fit checks and QoS.

Everything that needs a quantity as a number (placement, a local run's cgroup, OOM growth,
sizing, cost) takes it from :func:`resource_amount`, in the units placement uses, and writes
memory back with :func:`mebibytes`; nothing else converts quantities.

Parsing is linear in the text and bounded: a quantity is at most :data:`MAX_LENGTH` characters
and at most :data:`MAX_VALUE` (what Kubernetes can hold, 2^63 - 1) in its base unit; exponents
are checked before any arithmetic, so ``1e10000003`` is refused at once instead of computed.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from runplane.errors import InvalidValueError

#: What the user may pass: Kubernetes accepts numbers and strings for quantities.
QuantityInput = int | float | str
#: The largest quantity Kubernetes represents (an int64), in the base unit (cores, bytes).
MAX_VALUE = 2**63 - 1
#: Longer texts are no quantities Kubernetes would keep.
MAX_LENGTH = 64
#: Bytes in a mebibyte, the unit memory is written back in (``512Mi``).
MEBIBYTE = 2**20
#: Values below this round up to it, as Kubernetes rounds to its smallest unit (1n).
_SMALLEST = Fraction(1, 10**9)

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
# k8s.io/apimachinery's resource.Quantity. In ASCII and matched whole: Python's \d takes any
# script's digits and its $ a trailing newline, both of which the API server refuses.
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?",
    re.ASCII,
)

_EXAMPLES = {
    "cpu": "cpu=1, cpu='500m', cpu=0.25",
    "memory": "mem='512Mi', mem='1G', mem='2Gi'",
}


def _allowed(kind: str) -> str:
    return (
        f"a {kind} quantity must be a non-negative number in ASCII digits with an optional "
        "Kubernetes suffix "
        "(m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent such as e9), at most "
        f"{MAX_VALUE} ({MAX_LENGTH} characters); MLRun accepts other text and Kubernetes "
        "then refuses the pod when the run starts, so runplane refuses it here ('50mi' is no "
        "quantity: '50m' is 50 millicores, '50Mi' 50 mebibytes)"
    )


def parse_quantity(
    field: str, value: object, kind: str = "cpu", example: str | None = None
) -> Fraction:
    """Parse ``value`` as a Kubernetes quantity, raising a user error that names ``field``
    (with ``example``, or the SDK's examples for ``kind``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        parsed = None
    else:
        parsed = _parse(value)
    if parsed is None:
        raise InvalidValueError(
            field, value, _allowed(kind), example or _EXAMPLES.get(kind, "'1', '1Gi'")
        )
    return parsed


@lru_cache(maxsize=4096, typed=True)
def _parse(value: int | float | str) -> Fraction | None:
    """The value of a quantity, or ``None`` if it is not one; cached because rendering, QoS and
    lints compare the same few quantities over and over."""
    if isinstance(value, float):
        if not math.isfinite(value) or not 0 <= value <= MAX_VALUE:
            return None
        return _bounded(Fraction(value).limit_denominator(10**9))
    if isinstance(value, int):
        return Fraction(value) if 0 <= value <= MAX_VALUE else None
    if len(value) > MAX_LENGTH:
        return None
    match = _QUANTITY.fullmatch(value)
    if match is None:
        return None
    number = Fraction(match["number"])
    if number < 0:
        return None
    if match["exponent"]:
        exponent = int(match["exponent"][1:])
        if number == 0:
            return Fraction(0)
        # A non-zero mantissa of at most MAX_LENGTH characters lies between 10**-MAX_LENGTH
        # and 10**MAX_LENGTH, so beyond these exponents the answer is known without computing
        # 10**exponent: too large, or below the smallest unit.
        if exponent > MAX_LENGTH + 19:
            return None
        if exponent < -(MAX_LENGTH + 9):
            return _SMALLEST
        return _bounded(number * Fraction(10) ** exponent)
    return _bounded(number * _SUFFIXES[match["suffix"] or ""])


def _bounded(value: Fraction) -> Fraction | None:
    if value > MAX_VALUE:
        return None
    return _SMALLEST if 0 < value < _SMALLEST else value


def format_quantity(value: QuantityInput) -> str:
    """Render a validated quantity as the string Kubernetes manifests carry."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def millicores(value: Fraction) -> int:
    """CPU in millicores, rounded up as the API server does for sub-milli values."""
    return math.ceil(value * 1000)


def whole_cores(amount: int) -> int:
    """Millicores as whole cores, rounded up: threads, pinned cores and Spark's ``cores``
    come in whole cores, and a part of one still needs one."""
    return math.ceil(amount / 1000)


def whole_bytes(value: Fraction) -> int:
    """Memory in bytes, rounded up (a fractional byte still needs a byte)."""
    return math.ceil(value)


def unit_of(name: str) -> str:
    """The unit placement counts resource ``name`` in: ``millicores`` for ``cpu``, ``bytes``
    for memory-like resources (``memory``, ``hugepages-*``, ``ephemeral-storage``), ``devices``
    for everything else (GPUs, ``pods``)."""
    if name == "cpu":
        return "millicores"
    if name == "memory" or name.startswith(("hugepages-", "ephemeral-storage")):
        return "bytes"
    return "devices"


def resource_amount(name: str, value: Any) -> int:
    """A quantity of resource ``name`` as a whole number in its :func:`unit_of`: millicores and
    bytes rounded up, devices rounded down."""
    if isinstance(value, int | float | str):
        return _amount(name, value)
    return int(parse_quantity(name, value, "memory"))  # refused, naming the field


@lru_cache(maxsize=4096, typed=True)
def _amount(name: str, value: int | float | str) -> int:
    """Cached: every render turns the same few quantities into numbers (as :func:`_parse`)."""
    unit = unit_of(name)
    if unit == "millicores":
        return millicores(parse_quantity(name, value, "cpu"))
    if unit == "bytes":
        return whole_bytes(parse_quantity(name, value, "memory"))
    return int(parse_quantity(name, value, "memory"))


def mebibytes(amount: float, *, up: bool = False) -> str:
    """Bytes as a quantity in ``Mi``: rounded to the nearest mebibyte for display, or ``up``
    for a quantity a run is given (it must hold ``amount``)."""
    count = math.ceil(amount / MEBIBYTE) if up else round(amount / MEBIBYTE)
    return f"{count}Mi"

"""How big and how deep what users send may be: every bound runplane enforces, in one place.

A shared service takes functions, parameters and environments from any user, so each has a
limit, checked before the value is used: Kubernetes' own where it has one, otherwise well
above any real use and far below what would hurt the service. Deep nesting is measured
without recursion, so checking a hostile value cannot itself exhaust the stack.
"""

from __future__ import annotations

import json
from typing import Any

from runplane.errors import InvalidValueError

#: The deepest nesting of lists and dicts in parameters (and any JSON a request carries).
MAX_DEPTH = 32
#: A run's parameters and inputs together, as JSON.
MAX_PARAMS_BYTES = 1 << 20
#: A function's embedded code. A run's pod carries it, and the API server keeps objects
#: below 1.5 MiB.
MAX_SOURCE_BYTES = 512 << 10
#: One environment variable's value (Linux passes at most 128 KiB per string to a program).
MAX_ENV_VALUE_BYTES = 128 << 10
#: Variables a function may set.
MAX_ENV_ITEMS = 512
#: A free text such as a description, or one command-line argument.
MAX_TEXT_BYTES = 64 << 10
#: Entries of a list such as ``args``, ``volumes`` or ``tolerations``.
MAX_ITEMS = 256
#: A file name or path inside a container.
MAX_PATH_LENGTH = 4096


def depth(value: Any) -> int:
    """How deeply lists and dicts nest in ``value`` (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:  # deeper is refused anyway: stop walking
            return deepest
        stack.extend((child, level) for child in children)
    return deepest


def check_json(field: str, value: Any, max_bytes: int, example: str) -> Any:
    """``value`` if it nests at most :data:`MAX_DEPTH` deep and is at most ``max_bytes`` as
    JSON (and is JSON at all)."""
    if depth(value) > MAX_DEPTH:
        raise InvalidValueError(
            field, _Elided(value), f"values nest at most {MAX_DEPTH} levels deep", example
        )
    try:
        size = len(json.dumps(value, allow_nan=False).encode())
    except (TypeError, ValueError):
        raise InvalidValueError(
            field,
            _Elided(value),
            "values are JSON: strings, finite numbers, booleans, null, lists and dicts",
            example,
        ) from None
    if size > max_bytes:
        raise InvalidValueError(
            field, _Elided(value), f"at most {max_bytes} bytes as JSON, got {size}", example
        )
    return value


def check_text(field: str, value: object, max_bytes: int, example: str) -> str:
    """A string of at most ``max_bytes`` (UTF-8) without NUL characters, which no program
    argument, environment value or file name can carry."""
    if not isinstance(value, str):
        raise InvalidValueError(field, value, "a string", example)
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise InvalidValueError(
            field, _Elided(value), f"at most {max_bytes} bytes, got {size}", example
        )
    if "\x00" in value:
        raise InvalidValueError(field, _Elided(value), "text without NUL characters", example)
    return value


def check_count(field: str, items: Any, limit: int = MAX_ITEMS) -> None:
    if isinstance(items, list | tuple | dict) and len(items) > limit:
        raise InvalidValueError(
            field, _Elided(items), f"at most {limit} entries, got {len(items)}", f"{limit}"
        )


class _Elided:
    """A large or deep value in an error message: its type and size, not its content."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        kind = type(self.value).__name__
        size = len(self.value) if isinstance(self.value, str | bytes | list | dict) else None
        return f"<{kind}{f' of {size}' if size is not None else ''}>"

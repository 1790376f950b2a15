"""How big and how deep what users send may be: every bound runplane enforces, in one place.

A shared service takes functions, parameters and environments from any user, so each has a
limit, checked before the value is used: Kubernetes' own where it has one, otherwise well
above any real use and far below what would hurt the service. Deep nesting is measured
without recursion, so checking a hostile value cannot itself exhaust the stack.

Text is Unicode characters. JSON can still spell half of a UTF-16 pair alone (``"\\ud800"``),
which Python decodes into a lone surrogate: a string no UTF-8 encoder writes, so every answer,
page or pod carrying it would fail. Such strings are refused wherever a value enters
(:func:`load_json`, :func:`check_text`, :func:`check_json`, :func:`check_unicode`), and
:func:`escape_surrogates` makes one already stored readable.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

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
#: GPUs (or units of another extended resource) one function asks for: more than any node
#: offers, even with time-sliced GPUs, and far below what breaks quantity arithmetic.
MAX_GPUS = 4096


#: How deep a request body may nest: its values' own :data:`MAX_DEPTH` and the few levels a
#: body wraps them in (a run's parameters sit two levels down, a function's parts up to six).
MAX_BODY_DEPTH = MAX_DEPTH + 8
#: Digits of one integer in a request body: as many as Python converts to text by default,
#: so every accepted number can be shown, stored and handed to a run.
MAX_INT_DIGITS = 4300
#: Path parts an error names: enough to say where, short enough to read.
_SHOWN_PARTS = 6
#: A lone surrogate: half of a UTF-16 pair, which is no character of its own.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: What a JSON text holding one looks like: an escape of one (a pair decodes to one character
#: beyond U+FFFF, so a pair of these is found and passes), or one encoded raw. Each pattern
#: starts with a literal, which the regular expression engine scans for quickly.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_UTF8 = re.compile(rb"\xed[\xa0-\xbf]")
_UNICODE = (
    "text is Unicode characters: a lone UTF-16 surrogate (\\ud800 to \\udfff) is half of a "
    "pair, not a character (a character beyond U+FFFF is written whole, or as both halves)"
)
_UNICODE_EXAMPLE = '"caf\\u00e9", "\\ud83d\\ude00"'


class _Refused:
    """A number the parser met that no field may hold; its place is found after parsing."""

    def __init__(self, text: str, reason: str) -> None:
        self.text = text
        self.reason = reason

    def __repr__(self) -> str:
        if len(self.text) <= 24:
            return self.text
        digits = self.text.lstrip("-")
        kind = "an integer" if digits.isdigit() else "a number"
        return f"<{kind} of {len(digits)} {'digits' if digits.isdigit() else 'characters'}>"


class _Deep:
    def __repr__(self) -> str:
        return "<a value nested too deep to show>"


def _integer(text: str) -> Any:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return _Refused(text, f"integers have at most {MAX_INT_DIGITS} digits")
    return int(text)


def _real(text: str) -> Any:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(text, "numbers are finite (at most about 1.8e308)")
    return value


def _constant(text: str) -> Any:
    return _Refused(text, "NaN and Infinity are not JSON numbers")


def load_json(raw: bytes | str) -> Any:
    """Parse a request body, refusing what would break the service later: nesting deeper
    than :data:`MAX_BODY_DEPTH`, integers of more than :data:`MAX_INT_DIGITS` digits,
    numbers beyond a float, ``NaN``/``Infinity``. Each is an :class:`InvalidValueError`
    naming where in the body it is (``params.x``)."""
    value = _read_fast(raw)
    if value is _CAREFUL:
        value = _read_carefully(raw)
    _check_parsed(value)
    if may_hold_surrogates(raw):  # rare: only then is every string looked at
        check_unicode("", value)
    return value


#: A run of digits long enough to be an integer beyond 64 bits, which orjson reads as a float.
_LONG_DIGITS = re.compile(r"\d{19}")
_LONG_DIGITS_BYTES = re.compile(rb"\d{19}")
#: What :func:`_read_fast` answers for a text it leaves to :func:`_read_carefully`.
_CAREFUL = object()


def _read_fast(raw: bytes | str) -> Any:
    """The text as orjson reads it (a few times faster: every request body passes here), where
    that is what the standard library's reading below gives. orjson refuses NaN, Infinity,
    numbers beyond a float, lone surrogates, text that is not UTF-8 and nesting beyond its
    own limit, all of which the careful reading refuses with words that say where, or reads
    (UTF-16, a byte order mark); it reads an integer beyond 64 bits as a float, so a text
    with a long run of digits anywhere is read carefully too."""
    if may_hold_long_integer(raw):
        return _CAREFUL
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _CAREFUL


def may_hold_long_integer(raw: bytes | str) -> bool:
    """Whether JSON text may hold an integer beyond 64 bits (it has a run of 19 digits), which
    orjson reads as a float: such text is read by the standard library, exactly."""
    found = _LONG_DIGITS_BYTES.search(raw) if isinstance(raw, bytes) else _LONG_DIGITS.search(raw)
    return found is not None


def _read_carefully(raw: bytes | str) -> Any:
    try:
        return json.loads(raw, parse_int=_integer, parse_float=_real, parse_constant=_constant)
    except RecursionError:  # deeper than the parser's stack: find where, from the text
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        raise _too_deep(_deep_path(text)) from None
    except UnicodeDecodeError:
        raise InvalidValueError(
            "body", _Elided(raw), "JSON in UTF-8", '{"params": {"epochs": 3}}'
        ) from None
    except json.JSONDecodeError as error:
        raise InvalidValueError(
            "body",
            _Elided(raw),
            f"JSON is expected ({error.msg} at line {error.lineno} column {error.colno})",
            '{"params": {"epochs": 3}}',
        ) from None


def _check_parsed(value: Any) -> None:
    """Walk the parsed body once, without recursion, for refused numbers and depth; where one
    is found, walk again keeping paths, to name it (every body passes here: the first walk
    builds no path)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            if isinstance(item, _Refused):
                break
            continue
        if depth >= MAX_BODY_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    else:
        return
    _name_refusal(value)


def _name_refusal(value: Any) -> None:
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Refused):
            raise InvalidValueError(_field(path), item, item.reason, "3, 0.5, 1e9")
        if len(path) >= MAX_BODY_DEPTH and isinstance(item, dict | list):
            raise _too_deep(path)
        if isinstance(item, dict):
            stack.extend((child, (*path, key)) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((child, (*path, index)) for index, child in enumerate(item))


#: The tokens that matter for nesting: strings (a key when a ':' follows) and brackets.
_TOKENS = re.compile(r'"((?:[^"\\]|\\.)*)"\s*(:?)|[\[\]{},]')


def _deep_path(text: str) -> tuple[str | int, ...]:
    """Where ``text`` first nests deeper than :data:`MAX_BODY_DEPTH`, scanned without
    building anything."""
    path: list[str | int] = []
    kinds: list[str] = []
    for token in _TOKENS.finditer(text):
        symbol = token.group(0)
        if symbol in ("[", "{"):
            if len(kinds) >= MAX_BODY_DEPTH:
                break
            kinds.append(symbol)
            path.append(0 if symbol == "[" else "")
        elif symbol in ("]", "}"):
            if kinds:
                kinds.pop()
                path.pop()
        elif symbol == ",":
            if kinds and kinds[-1] == "[":
                path[-1] = int(path[-1]) + 1
        elif token.group(2) and kinds and kinds[-1] == "{":
            path[-1] = _key(token.group(1))
    return tuple(path)


def _key(text: str) -> str:
    """A key as JSON text (escapes and all) decoded; left as written if it does not decode."""
    try:
        return str(json.loads(f'"{text}"'))
    except ValueError:
        return text


def _too_deep(path: tuple[str | int, ...]) -> InvalidValueError:
    return InvalidValueError(
        _field(path),
        _Deep(),
        f"JSON nests at most {MAX_BODY_DEPTH} levels deep here (each value of a request at "
        f"most {MAX_DEPTH})",
        '{"params": {"layers": [64, 32]}}',
    )


def _field(path: tuple[str | int, ...]) -> str:
    """``params.x[0][1]``: where in a body, the first few parts of it."""
    text = ""
    for part in path[:_SHOWN_PARTS]:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    if len(path) > _SHOWN_PARTS:
        text += "..."
    return text or "body"


def may_hold_surrogates(raw: str | bytes) -> bool:
    """Whether JSON text may decode to a string with a lone surrogate: it holds an escape of
    one (or, raw, one encoded). A plain search for a backslash-u comes first: most texts have
    none at all."""
    if isinstance(raw, bytes):
        return (b"\\u" in raw and _SURROGATE_ESCAPE_BYTES.search(raw) is not None) or (
            b"\xed" in raw and _SURROGATE_UTF8.search(raw) is not None
        )
    return ("\\u" in raw and _SURROGATE_ESCAPE.search(raw) is not None) or has_surrogate(raw)


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (ASCII text, the common case, is answered at
    once)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def check_unicode(field: str, value: Any) -> Any:
    """``value`` if no string in it (a key either) holds a lone surrogate; otherwise an
    :class:`InvalidValueError` naming where (``params.x``), walked without recursion."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, (field,) if field else ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if has_surrogate(item):
                raise InvalidValueError(_field(path), item, _UNICODE, _UNICODE_EXAMPLE)
        elif len(path) > MAX_BODY_DEPTH + 1:  # refused as too deep elsewhere: not walked
            continue
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and has_surrogate(key):
                    raise InvalidValueError(
                        _field((*path, escape_surrogates(key))), key, _UNICODE, _UNICODE_EXAMPLE
                    )
                stack.append((child, (*path, key)))
        elif isinstance(item, list | tuple):
            stack.extend((child, (*path, index)) for index, child in enumerate(item))
    return value


def escape_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) written as its escape,
    ``\\ud800``: how a value stored before they were refused is shown and sent, since no
    encoder writes one. Other strings and values come back equal (containers are copied)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode() if has_surrogate(value) else value
    if isinstance(value, dict):
        return {escape_surrogates(key): escape_surrogates(child) for key, child in value.items()}
    if isinstance(value, list):
        return [escape_surrogates(child) for child in value]
    return value


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
    json_text(field, value, max_bytes, example)
    return value


def plain_json_text(value: Any) -> str:
    """``value`` as :func:`json_text` writes it, unchecked: it raises what ``json.dumps``
    raises (``ValueError`` for a number that is not finite, ``RecursionError`` for a value
    too deep for it)."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False)


def json_text(field: str, value: Any, max_bytes: int, example: str, text: str | None = None) -> str:
    """``value`` as JSON text, checked as :func:`check_json` checks it; ``text``, where given,
    is :func:`plain_json_text` of it made already. Two values read from JSON give the same
    text only if they are equal and of the same types (``1`` and ``1.0``, ``true`` and ``1``
    differ), so the text can stand for the value."""
    if depth(value) > MAX_DEPTH:
        raise InvalidValueError(
            field, _Elided(value), f"values nest at most {MAX_DEPTH} levels deep", example
        )
    try:
        text = plain_json_text(value) if text is None else text
        size = len(text.encode())
    except UnicodeEncodeError:  # a lone surrogate: say where
        check_unicode(field, value)
        raise
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
    return text


def check_text(field: str, value: object, max_bytes: int, example: str) -> str:
    """A string of at most ``max_bytes`` (UTF-8) without NUL characters, which no program
    argument, environment value or file name can carry, nor lone surrogates, which no UTF-8
    can."""
    if not isinstance(value, str):
        raise InvalidValueError(field, value, "a string", example)
    size = len(value.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise InvalidValueError(
            field, _Elided(value), f"at most {max_bytes} bytes, got {size}", example
        )
    if "\x00" in value:
        raise InvalidValueError(field, _Elided(value), "text without NUL characters", example)
    if has_surrogate(value):
        raise InvalidValueError(field, value, _UNICODE, example)
    return value


def check_count(field: str, items: Any, limit: int = MAX_ITEMS) -> None:
    if isinstance(items, list | tuple | dict) and len(items) > limit:
        raise InvalidValueError(
            field, _Elided(items), f"at most {limit} entries, got {len(items)}", f"{limit}"
        )


def check_lines(field: str, value: object, example: str, line_example: str) -> list[str]:
    """A list of texts (arguments, requirements, commands): counted, and each line checked."""
    if not isinstance(value, list):
        raise InvalidValueError(field, value, "a list of strings", example)
    check_count(field, value)
    for index, line in enumerate(value):
        check_text(f"{field}[{index}]", line, MAX_TEXT_BYTES, line_example)
    return value


class _Elided:
    """A large or deep value in an error message: its type and size, not its content."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        kind = type(self.value).__name__
        size = len(self.value) if isinstance(self.value, str | bytes | list | dict) else None
        return f"<{kind}{f' of {size}' if size is not None else ''}>"

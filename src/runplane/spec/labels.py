"""Kubernetes names: label keys and values, DNS names, environment variable names.

Validated with the API server's own rules so that a bad selector fails at the call that set
it, with the rule spelled out, instead of at submission time.
"""

from __future__ import annotations

import re
import warnings

from runplane.errors import InvalidValueError, MalformedNameError

_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

LABEL_KEY_RULE = (
    "a label key is an optional DNS-subdomain prefix (at most 253 characters) and '/', then a "
    "name of at most 63 characters: letters, digits, '-', '_', '.', starting and ending with a "
    "letter or digit"
)
LABEL_VALUE_RULE = (
    "a label value is at most 63 characters: letters, digits, '-', '_', '.', starting and "
    "ending with a letter or digit (or empty)"
)


def check_label_key(field: str, key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidValueError(field, key, LABEL_KEY_RULE, "'app.iguazio.com/lifecycle'")
    prefix, slash, name = key.rpartition("/")
    valid = (
        0 < len(name) <= 63
        and _NAME.match(name) is not None
        and (not slash or (0 < len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix) is not None))
    )
    if not valid:
        raise InvalidValueError(field, key, LABEL_KEY_RULE, "'app.iguazio.com/lifecycle'")
    return key


def check_label_value(field: str, value: object) -> str:
    if not isinstance(value, str) or len(value) > 63 or _NAME.match(value) is None:
        raise InvalidValueError(field, value, LABEL_VALUE_RULE, "'non-preemptible'")
    return value


def check_labels(field: str, labels: object) -> dict[str, str]:
    """Validate a ``{key: value}`` mapping of labels; returns a fresh dict."""
    if not isinstance(labels, dict):
        raise InvalidValueError(
            field,
            labels,
            "a mapping of label keys to values",
            "{'app.iguazio.com/lifecycle': 'non-preemptible'}",
        )
    checked: dict[str, str] = {}
    for key, value in labels.items():
        check_label_key(f"{field} key", key)
        check_label_value(f"{field}[{key!r}]", value)
        checked[key] = value
    return checked


def check_dns_subdomain(field: str, name: object, example: str = "'training'") -> str:
    """A name of most Kubernetes objects (a Secret, a claim, a priority class)."""
    return _check_name(field, name, example, _DNS_SUBDOMAIN, 253, "digits, '-' and '.'")


def check_dns_label(field: str, name: object, example: str = "'training'") -> str:
    """A name that is also one part of a host name (a function, a project, a volume)."""
    return _check_name(field, name, example, _DNS_LABEL, 63, "digits and '-'")


def check_run_name(field: str, name: str) -> str:
    """A run's name: refused in MLRun's words (``Field 'run.metadata.name' is malformed``)
    when it can not be a name, as ``asd/asd`` can not."""
    if 0 < len(name) <= 63 and _DNS_LABEL.match(name):
        return name
    raise MalformedNameError(
        field,
        name,
        f"Field 'run.metadata.name' is malformed. {name!r} does not match required pattern: "
        "lower-case letters, digits and '-', starting and ending with a letter or digit, at "
        "most 63 characters",
        "run(name='train-1')",
    )


def check_secret_name(field: str, name: object) -> str:
    """A Secret's name (an image pull secret): no Secret can have another name, so a run
    given one could never pull its image; MLRun accepts it, and the error says so."""
    if isinstance(name, str) and 0 < len(name) <= 253 and _DNS_SUBDOMAIN.match(name):
        return name
    raise InvalidValueError(
        field,
        name,
        "a Secret's name is lower-case letters, digits, '-' and '.', starting and ending with a "
        "letter or digit, at most 253 characters (MLRun accepts other names, but no Secret "
        "can have one, so the image could never be pulled with it; name the Secret as "
        "Kubernetes knows it, with '-' for '_')",
        "'registry-credentials'",
    )


def _check_name(
    field: str, name: object, example: str, pattern: re.Pattern[str], most: int, others: str
) -> str:
    if not isinstance(name, str) or not 0 < len(name) <= most or not pattern.match(name):
        raise InvalidValueError(
            field,
            name,
            f"a name is lower-case letters, {others}, starting and ending with a letter or "
            f"digit, at most {most} characters",
            example,
        )
    return name


def normalize_name(field: str, name: object) -> object:
    """A function name as Kubernetes needs it: MLRun's rule (spaces and ``_`` become ``-``,
    upper case becomes lower) applied with a warning, so ``secret_func`` is ``secret-func``."""
    if not isinstance(name, str):
        return name
    normalized = re.sub(r"\s+", "-", name.strip()).replace("_", "-").lower()
    if normalized != name:
        warnings.warn(
            f"{field}: {name!r} is not a valid Kubernetes name; using {normalized!r} "
            "(lower case, '-' for '_' and spaces)",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return normalized


def user_stacklevel() -> int:
    """The ``stacklevel`` of the first caller outside runplane and pydantic, so a warning
    points at the user's line."""
    import os
    import sys

    ours = (os.path.dirname(os.path.dirname(__file__)), os.sep + "pydantic")
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(ours[0]) or ours[1] in frame.f_code.co_filename
    ):
        frame, level = frame.f_back, level + 1
    return level


_ENV_NAME = re.compile(r"^[^=\x00-\x1f\x7f]+$")


def check_env_name(field: str, name: object) -> str:
    """Kubernetes accepts any printable ASCII except '=' in environment variable names."""
    if not isinstance(name, str) or not name.isascii() or not _ENV_NAME.match(name):
        raise InvalidValueError(
            field, name, "an environment variable name is printable ASCII without '='", "'MY_ENV'"
        )
    return name

"""Environment variables: plain values, and secrets that are referenced, never copied.

Variables are kept as the Kubernetes ``env`` list so order is preserved (later variables may
refer to earlier ones with ``$(NAME)``) and rendering is a copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runplane import names
from runplane.errors import InvalidValueError, NotFoundError
from runplane.spec.base import to_kubernetes_json
from runplane.spec.bounds import MAX_ENV_ITEMS, MAX_ENV_VALUE_BYTES, check_count, check_text
from runplane.spec.labels import check_dns_subdomain, check_env_name
from runplane.spec.volumes import check_key

EnvVar = dict[str, Any]


def plain_value(field: str, value: object) -> str:
    """Environment values are strings; numbers and booleans are converted as users expect."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return check_text(field, str(value), MAX_ENV_VALUE_BYTES, "'MY_VAL'")
    raise InvalidValueError(field, value, "a value is a string, number or boolean", "'MY_VAL'")


def _check_name(field: str, name: object) -> str:
    """A variable name the function may set: valid, and not one runplane sets for every run."""
    checked = check_env_name(field, name)
    if checked in names.RESERVED_ENV:
        raise InvalidValueError(
            field,
            name,
            "runplane sets this variable in every run's container (runplane's own variables: "
            + ", ".join(sorted(names.RESERVED_ENV))
            + "); choose another name",
            "set_env('MY_PARAMS', ...)",
        )
    return checked


def value_var(name: object, value: object) -> EnvVar:
    return {"name": _check_name("env name", name), "value": plain_value(f"env {name}", value)}


def secret_var(name: object, secret: object, secret_key: object) -> EnvVar:
    _check_name("env name", name)
    check_dns_subdomain("secret", secret, "'db-credentials'")
    check_key("secret_key", secret_key)
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": secret_key}}}


#: The sources a variable may reference, with the fields each one needs.
VALUE_FROM_SOURCES = {
    "secretKeyRef": ("name", "key"),
    "configMapKeyRef": ("name", "key"),
    "fieldRef": ("fieldPath",),
    "resourceFieldRef": ("resource",),
}


def check_value_from(field: str, source: Any) -> dict[str, Any]:
    """A ``valueFrom`` in Kubernetes shape: exactly one known source with its required fields."""
    source = to_kubernetes_json(source)
    valid = (
        isinstance(source, dict)
        and len(source) == 1
        and next(iter(source)) in VALUE_FROM_SOURCES
        and isinstance(ref := next(iter(source.values())), dict)
        and all(ref.get(needed) for needed in VALUE_FROM_SOURCES[next(iter(source))])
    )
    if not valid:
        raise InvalidValueError(
            field,
            source,
            "valueFrom has one of secretKeyRef or configMapKeyRef (name, key), fieldRef "
            "(fieldPath) or resourceFieldRef (resource)",
            "{'secretKeyRef': {'name': 'creds', 'key': 'token'}}",
        )
    kind, ref = next(iter(source.items()))
    if kind in ("secretKeyRef", "configMapKeyRef"):
        check_dns_subdomain(f"{field}.{kind}.name", ref["name"], "'creds'")
        check_key(f"{field}.{kind}.key", ref["key"])
    return dict(source)


def value_from_var(name: object, source: Any) -> EnvVar:
    return {
        "name": _check_name("env name", name),
        "valueFrom": check_value_from(f"env {name} value_from", source),
    }


def upsert(env: list[EnvVar], variable: EnvVar) -> list[EnvVar]:
    """A new list where ``variable`` replaces one of the same name, or is appended."""
    replaced = [variable if item["name"] == variable["name"] else item for item in env]
    if not any(item["name"] == variable["name"] for item in env):
        replaced.append(variable)
    return replaced


def check_env_list(field: str, env: Any) -> list[EnvVar]:
    """Validate an ``env`` list read from YAML: names, and either value or secretKeyRef.
    Kubernetes client objects (``V1EnvVar``) are accepted and kept as plain dicts."""
    env = to_kubernetes_json(env)
    if not isinstance(env, list):
        raise InvalidValueError(
            field, env, "env is a list of {name, value}", "[{'name': 'A', 'value': '1'}]"
        )
    check_count(field, env, MAX_ENV_ITEMS)
    seen: set[str] = set()
    for index, item in enumerate(env):
        if (
            not isinstance(item, dict)
            or "name" not in item
            or set(item) - {"name", "value", "valueFrom"}
        ):
            raise InvalidValueError(
                f"{field}[{index}]",
                item,
                "an env entry has name and value (or valueFrom)",
                "{'name': 'A', 'value': '1'}",
            )
        _check_name(f"{field}[{index}].name", item["name"])
        if item["name"] in seen:
            raise InvalidValueError(
                f"{field}[{index}].name",
                item["name"],
                "each variable is set once",
                "set_env(name, value) replaces",
            )
        seen.add(item["name"])
        if "valueFrom" in item:
            check_value_from(f"{field}[{index}].valueFrom", item["valueFrom"])
        else:
            check_text(f"{field}[{index}].value", item.get("value", ""), MAX_ENV_VALUE_BYTES, "'1'")
    return env


def read_env_file(file_path: str | Path) -> dict[str, str]:
    """Variables of a dotenv file, refusing lines the dotenv grammar cannot parse.

    python-dotenv skips bad lines with a logged warning; a silently dropped variable is worse
    than an error, so its parser is used to find them and name the line.
    """
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    path = Path(file_path)
    if not path.is_file():
        raise NotFoundError(f"set_envs(file_path=...): env file {path} does not exist")
    with path.open(encoding="utf-8") as stream:
        for binding in parse_stream(stream):
            if binding.error or (binding.key is not None and binding.value is None):
                line = binding.original.line
                raise InvalidValueError(
                    f"{path}:{line}",
                    binding.original.string.rstrip("\n"),
                    "each line of an env file is NAME=value, a comment or blank",
                    "MY_ENV=MY_VAL",
                )
    values = dotenv_values(path, interpolate=False)
    return {key: value or "" for key, value in values.items()}


def read_requirements(
    requirements: str | Sequence[str] | None, requirements_file: str | Path = ""
) -> list[str]:
    """Package requirements from a list, a requirements file, or both; comments and blank
    lines dropped."""
    lines: list[str] = []
    if isinstance(requirements, str):
        if Path(requirements).is_file():  # MLRun accepts a file path here too
            requirements_file, requirements = requirements, None
        else:
            lines.append(requirements)
    elif requirements is not None:
        if not all(isinstance(item, str) for item in requirements):
            raise InvalidValueError(
                "requirements", requirements, "a list of strings", "['pandas==2.2']"
            )
        lines += list(requirements)
    if requirements_file:
        path = Path(requirements_file)
        if not path.is_file():
            raise NotFoundError(f"requirements_file: {str(path)!r} does not exist")
        lines += path.read_text(encoding="utf-8").splitlines()
    kept = (line.split(" #", 1)[0].strip() for line in lines)  # inline comments too (pip's rule)
    return [line for line in kept if line and not line.startswith("#")]

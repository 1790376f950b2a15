"""The filters users reach for on lists: ``-l/--selector key=value``, ``--name``, ``--owner``,
``--since``. Runs are filtered by the store (the listing API's own filters); the other lists
are short, read whole, and filtered here by the same rules."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import click


class When(click.ParamType[float]):
    """A moment: ISO 8601 (this machine's time zone when it names none) or a duration ago
    (``2h``, ``1 day``); seconds since the epoch."""

    name = "time"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        from datetime import datetime

        from runplane.errors import InvalidValueError
        from runplane.spec.durations import parse_duration

        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            return datetime.fromisoformat(text).timestamp()
        except ValueError:
            pass
        try:
            return time.time() - parse_duration("time", text)
        except InvalidValueError:
            self.fail(
                f"{text[:40]!r} is neither an ISO 8601 time nor a duration ago; examples: "
                "2026-11-25, 2026-11-25T08:00, 2h, '1 day'"
            )


class Selector(click.ParamType[tuple[str, str]]):
    """``key=value``: a label an object must have (kubectl's ``-l``)."""

    name = "key=value"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, str]:
        if isinstance(value, tuple):
            return value
        from runplane.errors import InvalidValueError
        from runplane.spec.labels import check_label_key, check_label_value

        key, equals, label = str(value).partition("=")
        if not equals or not key:
            self.fail(f"{str(value)[:80]!r} is not KEY=VALUE (example: -l team=vision)")
        try:
            return check_label_key("label key", key), check_label_value("label value", label)
        except InvalidValueError as error:
            self.fail(str(error))


def selector_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("-l", "--selector", "selector", multiple=True, type=Selector(), help=help)


def name_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--name", help=help)


def owner_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--owner", help=help)


def since_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--since", type=When(), help=help)


@dataclass(frozen=True, slots=True)
class Wanted:
    """What a list keeps: a whole name, an owner, created at or after ``since``, all labels."""

    name: str | None = None
    owner: str | None = None
    since: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def keep(
        self,
        items: Iterable[dict[str, Any]],
        *,
        owner: str = "owner",
        created: str = "created_at",
        labels: Callable[[dict[str, Any]], Mapping[str, str]] = lambda item: {},
    ) -> list[dict[str, Any]]:
        """The items that match; ``owner`` and ``created`` name the items' fields."""
        return [item for item in items if self._matches(item, owner, created, labels)]

    def _matches(
        self,
        item: dict[str, Any],
        owner: str,
        created: str,
        labels: Callable[[dict[str, Any]], Mapping[str, str]],
    ) -> bool:
        if self.name is not None and item.get("name") != self.name:
            return False
        if self.owner is not None and item.get(owner) != self.owner:
            return False
        if self.since is not None and (item.get(created) or 0) < self.since:
            return False
        found = labels(item)
        return all(found.get(key) == value for key, value in self.labels.items())

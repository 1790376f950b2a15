"""How every list prints: ``-o table|wide`` as aligned columns, ``-o json|yaml`` as the API's
objects, so a script reads the same fields whether runs go to the embedded default or to a
service.

Tables are plain text, kubectl's way: a header, then a line per object, columns padded to the
widest cell. A watched list prints its later lines to the widths of its first table, so the
lines of a ``-w`` stay under their header.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import click

FORMATS = ("table", "wide", "json", "yaml")


@dataclass(frozen=True, slots=True)
class Column:
    """A table's column: its header and the cell of an object; ``wide`` ones show with ``-o
    wide`` only. ``width`` is the least it takes: a watch that starts from an empty list
    still keeps the lines of common values under their headers."""

    header: str
    cell: Callable[[dict[str, Any]], str]
    wide: bool = False
    width: int = 0


def output_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``-o/--output``, for every list."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="table; wide: more columns; json or yaml: the API's objects, for scripts.",
    )(command)


class Table:
    """Columns sized by the rows of the first print; later lines (a watch's) keep the
    widths."""

    def __init__(self, columns: Sequence[Column], wide: bool) -> None:
        self.columns = [column for column in columns if wide or not column.wide]
        self.widths = [max(len(column.header), column.width) for column in self.columns]

    def cells(self, item: dict[str, Any]) -> list[str]:
        return [column.cell(item) or "-" for column in self.columns]

    def lines(self, items: Iterable[dict[str, Any]]) -> list[str]:
        """The header and a line per item; the widths fit them all."""
        rows = [self.cells(item) for item in items]
        for row in rows:
            self.widths = [max(w, len(cell)) for w, cell in zip(self.widths, row, strict=True)]
        return [self.line([column.header for column in self.columns])] + [
            self.line(row) for row in rows
        ]

    def line(self, cells: Sequence[str]) -> str:
        padded = [cell.ljust(width) for cell, width in zip(cells, self.widths, strict=True)]
        return "   ".join(padded).rstrip()


def emit(items: list[dict[str, Any]], columns: Sequence[Column], output: str) -> None:
    """Print ``items`` (the API's objects) as ``output`` asks."""
    if output in ("json", "yaml"):
        click.echo(dumped(items, output), nl=output == "json")
        return
    for line in Table(columns, output == "wide").lines(items):
        click.echo(line)


def dumped(value: Any, output: str) -> str:
    """``value`` as JSON (indented) or YAML, keys in the API's order."""
    if output == "json":
        return json.dumps(value, indent=2)
    import yaml

    text: str = yaml.safe_dump(value, sort_keys=False, allow_unicode=True)
    return text


def pairs(values: dict[str, Any] | None) -> str:
    """``k=v,k2=v2``: labels and selectors as kubectl shows them."""
    return ",".join(f"{key}={value}" for key, value in (values or {}).items())


def cores(millicores: int | None) -> str:
    """CPU in placement's millicores as a user writes it: ``2``, ``500m``."""
    if millicores is None:
        return ""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def size(amount: int | None) -> str:
    """Bytes in binary units, as Kubernetes writes memory: ``512Mi``, ``7.6Gi``."""
    if not amount:
        return "0"
    value = float(amount)
    for unit in ("", "Ki", "Mi", "Gi", "Ti"):
        if abs(value) < 1024 or unit == "Ti":
            return f"{value:.0f}" if not unit else f"{value:.1f}".removesuffix(".0") + unit
        value /= 1024
    return str(amount)


def amount(resource: str, value: int | None) -> str:
    """One of placement's whole amounts in its usual unit."""
    from runplane.spec.quantity import unit_of

    unit = unit_of(resource)
    if unit == "millicores":
        return cores(value)
    if unit == "bytes":
        return size(value)
    return "" if value is None else str(value)

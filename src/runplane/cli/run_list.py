"""``runplane runs``: recent runs a page at a time, filtered by the listing API's own filters,
and with ``-w`` a line per change as runs change (kubectl's ``get -w``).

A watch asks for the runs changed since the newest change it has seen (the listing's
``updated_since``), every :data:`WATCH_INTERVAL` seconds: one bounded query per tick, however
many runs there are, and nothing missed between ticks.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import click

from runplane.cli.completion import complete_function
from runplane.cli.detail import mebibytes, span
from runplane.cli.examples import example
from runplane.cli.filters import Selector, When
from runplane.cli.options import WholeNumber
from runplane.cli.output import Column, Table, dumped, emit, output_option, pairs
from runplane.runs import MAX_LISTED, RunState

if TYPE_CHECKING:
    from runplane.client import Backend

#: How often a watch asks what changed.
WATCH_INTERVAL = 0.5


def _started(run: dict[str, Any]) -> str:
    return time.strftime("%m-%d %H:%M:%S", time.localtime(run["created_at"]))


def _duration(run: dict[str, Any]) -> str:
    return span((run["ended_at"] or time.time()) - run["created_at"])


def _node(run: dict[str, Any]) -> str:
    attempts = run.get("attempts") or []
    return str(attempts[-1].get("node") or "") if attempts else ""


def _labels(run: dict[str, Any]) -> dict[str, str]:
    metadata = (run.get("function") or {}).get("metadata") or {}
    return dict(metadata.get("labels") or {})


COLUMNS = [
    Column("UID", lambda run: str(run["uid"][:12]), width=12),
    Column("PROJECT", lambda run: str(run["project"]), width=12),
    Column("NAME", lambda run: str(run["name"]), width=24),
    Column("STATE", lambda run: str(run["state"]), width=9),
    Column("REASON", lambda run: str(run["reason"]), width=12),
    Column("ATTEMPT", lambda run: str(run["attempt"])),
    Column("STARTED", _started, width=14),
    Column("DURATION", _duration),
    Column("PEAK-MEM", lambda run: mebibytes(run["peak_memory_bytes"])),
    Column("CPU-S", lambda run: f"{run['cpu_seconds']:.2f}"),
    Column("OWNER", lambda run: str(run.get("owner") or ""), wide=True, width=12),
    Column("NODE", _node, wide=True, width=12),
    Column("LABELS", lambda run: pairs(_labels(run)), wide=True, width=12),
    Column("STATUS", lambda run: str(run.get("status_text") or ""), wide=True),
]


@click.command(
    "runs",
    epilog=example("runplane runs --since 2h -l team=vision --state error -o wide"),
)
@click.option("--project", help="Only this project's runs.")
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice([state.value for state in RunState]),
    help="Only runs in this state (repeatable).",
)
@click.option("--owner", help="Only this user's runs (admins; others see only their own).")
@click.option(
    "--name",
    shell_complete=complete_function,
    help="Only runs of the function of this name (the whole name).",
)
@click.option(
    "-l",
    "--selector",
    "--label",
    "labels",
    multiple=True,
    type=Selector(),
    help="Only runs whose function has this label, KEY=VALUE (repeatable: all of them).",
)
@click.option("--since", type=When(), help="Only runs created since then: 2h, '1 day', ISO 8601.")
@click.option("--until", type=When(), help="Only runs created before then: 2h, ISO 8601.")
@click.option(
    "--limit",
    type=WholeNumber(1, MAX_LISTED),
    default=30,
    show_default=True,
    help="How many runs, newest first (a page).",
)
@click.option(
    "--after",
    metavar="CURSOR",
    help="The page after the last one shown (its cursor, which the command prints).",
)
@output_option
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="After the list, a line per change as runs change, until Ctrl-C.",
)
def runs_command(
    project: str | None,
    states: tuple[str, ...],
    owner: str | None,
    name: str | None,
    labels: tuple[tuple[str, str], ...],
    since: float | None,
    until: float | None,
    limit: int,
    after: str | None,
    output: str,
    watch: bool,
) -> None:
    """List recent runs, a page at a time, newest first; with -w, follow their changes."""
    from runplane.client import backend

    service = backend()
    listing: dict[str, Any] = {
        "project": project,
        "states": states,
        "owner": owner,
        "name": name,
        "labels": dict(labels),
        "created_since": since,
        "created_until": until,
    }
    records, cursor = service.page(limit=limit, after=after, **listing)
    runs = [record.to_json() for record in records]
    if not watch:
        emit(runs, COLUMNS, output)
        if cursor is not None:
            click.echo(f"more runs: the same command with --after {cursor}", err=True)
        return
    try:
        _watch(service, listing, runs, output)
    except KeyboardInterrupt:
        return  # Ctrl-C ends a watch: done, as kubectl's


def _watch(
    service: Backend, listing: dict[str, Any], runs: list[dict[str, Any]], output: str
) -> None:
    """Print the runs, then each change of a run the filters match, as it comes."""
    table = Table(COLUMNS, output == "wide")
    tabular = output in ("table", "wide")
    for line in table.lines(runs) if tabular else [_one(run, output) for run in runs]:
        click.echo(line)
    newest, _ = service.page(limit=1, updated_since=0.0, **listing)  # the latest change
    seen = {run["uid"]: run["updated_at"] for run in runs}
    cursor = newest[0].updated_at if newest else 0.0
    if newest:
        seen.setdefault(newest[0].uid, newest[0].updated_at)
    while True:
        time.sleep(WATCH_INTERVAL)
        changed, _ = service.page(limit=MAX_LISTED, updated_since=cursor, **listing)
        for record in reversed(changed):  # the oldest change first
            if seen.get(record.uid) == record.updated_at:
                continue  # the cursor's own run, told already
            seen[record.uid] = record.updated_at
            cursor = max(cursor, record.updated_at)
            run = record.to_json()
            click.echo(table.line(table.cells(run)) if tabular else _one(run, output))


def _one(run: dict[str, Any], output: str) -> str:
    """A watched run as JSON (one line per run) or as a YAML document."""
    if output == "json":
        return json.dumps(run)
    return "---\n" + dumped(run, "yaml").rstrip("\n")

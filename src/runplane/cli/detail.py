"""``runplane get run``'s human view: the run, its attempts as a table, its transitions."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from runplane.runtimes import resizing
from runplane.spec import quantity

if TYPE_CHECKING:
    from runplane.runs import AttemptRecord, RunRecord


def _clock(at: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at)) if at else "-"


def span(seconds: float | None) -> str:
    """A duration as people read it: ``4.2s``, ``3m07s``, ``2h05m``."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def mebibytes(amount: int) -> str:
    return quantity.mebibytes(amount) if amount else "-"


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in values.items()) or "-"


def attempt_state(attempt: AttemptRecord, now: float) -> str:
    """What an attempt is doing or how it ended, in a word or two."""
    if attempt.ended_at is not None:
        return attempt.failure or ("completed" if attempt.exit_code in (0, None) else "ended")
    if attempt.started_at is not None:
        return "running"
    if attempt.launched_at is None and attempt.due_at is not None and attempt.due_at > now:
        return f"due in {span(attempt.due_at - now)}"
    return "pending"


def attempts_table(record: RunRecord) -> Any:
    """One row per attempt: where it ran, with what, how it ended and why it ran as it did."""
    from rich.table import Table

    now = time.time()
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in (
        "#",
        "state",
        "node",
        "group",
        "spot",
        "mode",
        "memory req/limit",
        "started",
        "ran",
        "exit",
        "peak mem",
        "reason",
    ):
        table.add_column(column)
    for attempt in record.attempts:
        ran = None
        if attempt.started_at is not None:
            ran = (attempt.ended_at or now) - attempt.started_at
        spot = "-" if attempt.spot is None else ("yes" if attempt.spot else "no")
        memory = (
            f"{attempt.requests.get('memory', '-')}/{attempt.limits.get('memory', '-')}"
            if attempt.requests or attempt.limits
            else "-"
        )
        why = attempt.reason
        if attempt.adjustments:
            why = f"{why}; {attempt.adjustments}" if why else attempt.adjustments
        table.add_row(
            str(attempt.number),
            attempt_state(attempt, now),
            attempt.node or "-",
            attempt.node_group or "-",
            spot,
            attempt.preemption_mode or "-",
            memory,
            _clock(attempt.started_at),
            span(ran),
            "-" if attempt.exit_code is None else str(attempt.exit_code),
            mebibytes(attempt.peak_memory_bytes),
            why or "-",
        )
    return table


def resizes_table(record: RunRecord) -> Any:
    """One row per in-place resize of the run's attempts (live right-sizing)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("at", "#", "how", "memory", "cpu", "outcome", "why"):
        table.add_column(column)
    for resize in record.resizes:
        how = resize.mode if resize.mode == "auto" else f"{resize.mode} ({resize.by or '-'})"
        table.add_row(
            _clock(resize.at),
            str(resize.attempt),
            escape(how),
            f"{resizing.memory(resize.memory_from)} → {resizing.memory(resize.memory_to)}",
            f"{resizing.millicores(resize.cpu_from)} → {resizing.millicores(resize.cpu_to)}",
            resize.outcome,
            escape(resize.why),
        )
    return table


def run_detail(
    record: RunRecord,
    usage: tuple[int, float] | None = None,
    cost: str = "",
    got: list[tuple[str, str]] | None = None,
) -> list[Any]:
    """What ``runplane get run`` prints: a summary, what the run got (as the run's page says
    it, :func:`runplane.rendering.summary.summary`), the attempts, the transitions."""
    from rich.markup import escape
    from rich.table import Table

    summary = Table.grid(padding=(0, 2))
    summary.add_row("run", record.uid)
    summary.add_row("function", f"{record.project}/{record.name}")
    summary.add_row("state", record.state + (f" ({record.reason})" if record.reason else ""))
    if record.status_text:
        summary.add_row("status", record.status_text)
    if record.owner:
        summary.add_row("owner", record.owner)
    summary.add_row(
        "created", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created_at))
    )
    end = record.ended_at or time.time()
    summary.add_row("duration", span(end - record.created_at))
    summary.add_row(
        "resources",
        f"requests {_pairs(record.requests)}; limits {_pairs(record.limits)}; "
        f"priority class {record.priority_class or '-'}",
    )
    if record.params:
        summary.add_row("params", _pairs(record.params))
    if record.results:
        summary.add_row("results", _pairs(record.results))
    for artifact in record.artifacts:
        summary.add_row("artifact", f"{artifact['key']}: {artifact['path']}")
    peak, cpu = usage or (record.peak_memory_bytes, record.cpu_seconds)
    summary.add_row(
        "usage", f"peak memory {mebibytes(peak)}, cpu {cpu:.2f}s" if peak else "not measured"
    )
    if record.isolation:
        summary.add_row("isolation", record.isolation)
    if cost:
        summary.add_row("cost", cost)
    transitions = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("at", "state", "reason", "message"):
        transitions.add_column(column)
    for transition in record.transitions:
        transitions.add_row(
            _clock(transition.at), transition.state, transition.reason or "-", transition.message
        )
    parts: list[Any] = [summary, ""]
    if got:
        received = Table.grid(padding=(0, 2))
        for what, words in got:
            received.add_row(escape(what.lower()), escape(words))
        parts += ["[bold]what it got[/]", received, ""]
    if record.resizes:
        parts += ["[bold]resizes[/]", resizes_table(record), ""]
    return [
        *parts,
        "[bold]attempts[/]",
        attempts_table(record),
        "",
        "[bold]transitions[/]",
        transitions,
    ]

"""``runplane get function NAME --suggest`` and ``runplane cost``: right-sizing and realised
spot savings, from the records of runs (on the embedded default or the service)."""

from __future__ import annotations

import click

from runplane.cli.completion import complete_function, complete_uid
from runplane.cli.examples import example
from runplane.cli.runs import _service, get_group, terminal
from runplane.errors import ConfigError, NotFoundError


@get_group.command(
    "function", epilog=example("runplane get function train --project default --suggest")
)
@click.argument("name", shell_complete=complete_function)
@click.option("--project", default="default", show_default=True)
@click.option("--suggest", is_flag=True, help="Propose requests and limits from observed usage.")
@click.option("--runs", "limit", default=100, show_default=True, help="Recent runs to read.")
def get_function(name: str, project: str, suggest: bool, limit: int) -> None:
    """Show what a function's recent runs used; with --suggest, the requests and limits that
    usage suggests (the p95 of the measured attempts x 1.15, at least the interpreter's own
    memory; none from fewer than 3 attempts) and requests far above it."""
    from rich.markup import escape
    from rich.table import Table

    from runplane.service.sizing import suggest as suggested

    records = [r for r in _service().list_runs(project=project, limit=limit) if r.name == name]
    if not records:
        raise NotFoundError(f"no runs of {project}/{name} among the last {limit}")
    proposal = suggested(records, records[0].requests)
    table = Table.grid(padding=(0, 2))
    table.add_row("function", f"{project}/{name}")
    table.add_row("runs", f"{len(records)} (of the last {limit} in the project)")
    table.add_row(
        "requests now", ", ".join(f"{k}={v}" for k, v in records[0].requests.items()) or "-"
    )
    table.add_row("limits now", ", ".join(f"{k}={v}" for k, v in records[0].limits.items()) or "-")
    if proposal is None:
        table.add_row("usage", "not measured (no attempt recorded its usage)")
    else:
        table.add_row("observed", escape(proposal.basis))
        if suggest:
            table.add_row("suggested", escape(proposal.verdict))
        for note in proposal.notes:
            table.add_row("note", escape(note))
        for warning in proposal.warnings:
            table.add_row("warning", escape(warning))
    terminal().print(table)


@click.command("cost", epilog=example("runplane cost --project default"))
@click.argument("uid", required=False, shell_complete=complete_uid)
@click.option("--project", help="All recent runs of a project (without UID).")
@click.option("--limit", default=1000, show_default=True)
def cost_command(uid: str | None, project: str | None, limit: int) -> None:
    """What a run (or a project's recent runs) cost, and what on-demand nodes would have cost,
    from the node-group prices in configuration (service.node_groups.<group>.hourly_price);
    with --project, also the project's budget and what it spent in the period now."""
    from runplane.config import current
    from runplane.service.costs import configured, money, run_cost, total_cost

    groups, on_demand = configured(current())
    if not groups:
        raise ConfigError(
            "no node-group prices are configured; set service.node_groups, e.g. "
            "{spot: {hourly_price: 0.12, cpu: 8, memory: 32Gi}, on-demand: {hourly_price: 0.38, "
            "cpu: 8, memory: 32Gi}}"
        )
    service = _service()
    if uid:
        record = service.get(uid)
        cost = run_cost(record, groups, on_demand)
        what = f"run {record.uid}"
    else:
        records = service.list_runs(project=project, limit=limit)
        cost = total_cost(records, groups, on_demand)
        what = f"{len(records)} runs" + (f" of project {project}" if project else "")
    if cost is None:
        click.echo(f"{what}: no cost known")
    else:
        click.echo(f"{what}: {cost.describe()}; saved {money(cost.savings)}")
    if project and not uid:
        from runplane.cli.budgets import standing_lines

        for line in standing_lines(service.budget(project)):
            click.echo(line)

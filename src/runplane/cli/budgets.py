"""``runplane project budget NAME``: a project's spend budget, shown, set or cleared by an
admin (docs/resilience.md), and the words every command shows a budget and an estimate in.

The budget goes where runs go (see :func:`runplane.client.backend`): with ``RUNPLANE_API`` the
service keeps it (``PUT /api/v1/projects/NAME/budget``, admins only); without it, the embedded
default's store, where the runs of this machine and a ``runplane serve`` on it find it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from runplane.cli.examples import example
from runplane.errors import NotFoundError

if TYPE_CHECKING:
    from runplane.client import Backend

EXAMPLE = "runplane project budget team-a --amount 500 --period month --action hold"


def standing_lines(standing: dict[str, Any]) -> list[str]:
    """A project's budget and spend in a few lines (none without a budget)."""
    budget = standing.get("budget")
    if not budget:
        return []
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(standing["period_start"]))
    end = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(standing["period_end"]))
    lines = [
        f"{standing['text']} (period {start} to {end}; at the limit: {budget['action']})",
    ]
    if standing.get("reached"):
        lines.append(f"  the budget is reached: {_meets(budget['action'])}")
    return lines


def _meets(action: str) -> str:
    return {
        "warn": "new runs still start, with a warning",
        "hold": "new runs wait pending until the period rolls over or the budget is raised",
        "spot-only": "new runs start only on spot nodes; runs that may not use spot wait",
    }.get(action, action)


def estimate_lines(answer: dict[str, Any]) -> list[str]:
    """A run's expected cost, and its project's budget."""
    return [str(answer["estimate"]["text"]), *standing_lines(answer.get("budget") or {})]


def _exists(service: Backend, name: str) -> None:
    """A name nothing uses is an error, not a project to budget."""
    try:
        found = service.get_project(name)
    except NotFoundError:
        found = {}
    except Exception as error:
        if getattr(error, "http_status", None) != 404:
            raise
        found = {}
    if not found:
        raise NotFoundError(
            f"project {name!r} does not exist: it has no record, runs, functions or "
            "schedules (runplane.new_project() makes one)"
        )


@click.command("budget", epilog=example(EXAMPLE))
@click.argument("name")
@click.option(
    "--amount",
    metavar="AMOUNT",
    help="What the project may spend in each period, in the node-group prices' currency.",
)
@click.option(
    "--period",
    type=click.Choice(["day", "week", "month"]),
    help="The period the amount is for, from midnight UTC (a week from Monday) [month].",
)
@click.option(
    "--action",
    type=click.Choice(["warn", "hold", "spot-only"]),
    help="What new runs meet at the limit: start with a warning, wait pending, or start only "
    "on spot nodes [warn].",
)
@click.option("--clear", is_flag=True, help="Drop the project's budget.")
def budget_command(
    name: str, amount: str | None, period: str | None, action: str | None, clear: bool
) -> None:
    """Show project NAME's spend budget and what it spent in the period, or set it (admins):
    running work is never stopped by a budget."""
    from runplane.client import backend

    if clear and (amount or period or action):
        raise click.UsageError("--clear takes no --amount, --period or --action")
    if amount is not None:
        from runplane.service.budgets import parse_amount

        parse_amount("--amount", amount)  # refused by its flag, before anything is asked
    service = backend()
    _exists(service, name)
    if clear:
        standing = service.clear_budget(name)
    elif amount is not None or period or action:
        current = service.budget(name).get("budget") or {}
        values = {
            "amount": amount if amount is not None else current.get("amount"),
            "period": period or current.get("period"),
            "action": action or current.get("action"),
        }
        if values["amount"] is None:
            raise click.UsageError(f"project {name} has no budget yet: give --amount")
        standing = service.set_budget(name, {k: v for k, v in values.items() if v is not None})
    else:
        standing = service.budget(name)
    lines = standing_lines(standing)
    click.echo("\n".join(lines) if lines else f"project {name}: no budget")

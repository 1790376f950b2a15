"""``runplane get deployments`` and ``runplane delete deployment``: serving functions here."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from runplane.config import Settings


def _settings() -> Settings:
    from runplane.config import current
    from runplane.errors import InvalidValueError

    settings = current()
    if settings.api:
        raise InvalidValueError(
            "RUNPLANE_API",
            settings.api,
            "deployments made through the service live on its cluster; list them there "
            "(kubectl get deployments -n <namespace>); these commands manage this machine's",
            "unset RUNPLANE_API",
        )
    return settings


@click.command("deployments")
@click.option("--json", "as_json", is_flag=True, help="Print the full status as JSON.")
def get_deployments(as_json: bool) -> None:
    """List serving functions deployed on this machine: replicas, restarts, scaling."""
    from rich.table import Table

    from runplane.cli.runs import terminal
    from runplane.runtimes.local.serving import list_deployments

    found = list_deployments(_settings())
    if as_json:
        click.echo(json.dumps(found, indent=1))
        return
    table = Table(box=None, header_style="bold")
    for column in ("project", "name", "state", "ready", "replicas", "restarts", "url", "scaling"):
        table.add_column(column)
    for status in found:
        replicas = status["replicas"]
        ready = sum(1 for replica in replicas if replica["state"] == "ready")
        bounds = (
            f" ({status['min_replicas']}-{status['max_replicas']})"
            if status.get("max_replicas")
            else ""
        )
        table.add_row(
            status["project"],
            status["name"],
            status["state"],
            f"{ready}/{status['desired']}",
            f"{status['desired']}{bounds} x {status['workers']} worker(s)",
            str(sum(replica["restarts"] for replica in replicas)),
            status["url"],
            status.get("scaling", ""),
        )
    terminal().print(table)


@click.group("delete")
def delete_group() -> None:
    """Remove an object."""


@delete_group.command("deployment")
@click.argument("name")
@click.option("--project", help="The function's project, when several have one of that name.")
def delete_deployment(name: str, project: str | None) -> None:
    """Stop a serving function deployed on this machine and remove it."""
    from runplane.runtimes.local.serving import delete

    click.echo(f"{delete(_settings(), name, project)} deleted")

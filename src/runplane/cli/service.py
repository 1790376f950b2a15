"""``runplane schedule ...`` and ``runplane deploy``: what only the service does."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from runplane.cli.examples import example
from runplane.cli.options import (
    apply_resource_options,
    load_function,
    resource_options,
    run_options,
)

if TYPE_CHECKING:
    from runplane.client.remote import ApiBackend
    from runplane.spec.run_options import RunOptions


def _api(what: str) -> ApiBackend:
    from runplane.client import api_backend

    return api_backend(what)


@click.group(
    "schedule",
    epilog=example("runplane schedule create train.py --handler train --cron '0 3 * * *'"),
)
def schedule_group() -> None:
    """Schedule runs for later (cron), list and delete schedules (needs RUNPLANE_API)."""


@schedule_group.command(
    "create",
    epilog=example("runplane schedule create train.py --handler train --cron '*/5 * * * *'"),
)
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--cron", required=True, help="Five cron fields, e.g. '*/5 * * * *'.")
@click.option("--handler", help="Function in the file to call.")
@click.option("--name", help="Function name (default: the file name).")
@run_options
@resource_options
def schedule_create(
    source: str,
    cron: str,
    handler: str | None,
    name: str | None,
    given: RunOptions,
    **options: Any,
) -> None:
    """Run a function from SOURCE on a cron schedule."""
    fn = apply_resource_options(load_function(source, name, handler, None), options)
    record = _api("a schedule").schedule(fn, cron, given)
    click.echo(f"{record['id']} {record['project']}/{record['name']} '{record['cron']}'")


@schedule_group.command("list", epilog=example("runplane schedule list"))
def schedule_list() -> None:
    """List schedules."""
    for record in _api("listing schedules").schedules():
        last = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record["last_fired_at"]))
        click.echo(
            f"{record['id']}  {record['project']}/{record['name']}  '{record['cron']}'  "
            f"last due {last}"
        )


@schedule_group.command("delete", epilog=example("runplane schedule delete 9b1f2c"))
@click.argument("schedule_id")
def schedule_delete(schedule_id: str) -> None:
    """Delete a schedule."""
    _api("deleting a schedule").delete_schedule(schedule_id)
    click.echo(f"{schedule_id} deleted")


@click.command("deploy", epilog=example("runplane deploy serve.py --handler handler --replicas 2"))
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--handler", help="Function in the file that serves requests.")
@click.option("--name", help="Function name (default: the file name).")
@resource_options
def deploy_command(source: str, handler: str | None, name: str | None, **options: Any) -> None:
    """Deploy a serving function: replicas on this machine, or through the service (RUNPLANE_API)
    a Deployment, Service and autoscaler on its cluster."""
    from runplane.client import deploy

    fn = apply_resource_options(load_function(source, name, handler, "serving"), options)
    answer = deploy(fn)
    assert isinstance(answer, dict)  # a serving function's deployment, never a job's True
    click.echo(f"{answer['namespace']}: " + ", ".join(answer["applied"]))

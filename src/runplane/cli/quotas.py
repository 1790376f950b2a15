"""``runplane project quota NAME``: a project's quota per flavor, shown, set or cleared by an
admin, and ``runplane get project NAME``: a project with its quotas and what its runs hold.

Quantities are the spec's (:func:`runplane.spec.quantity.parse_quantity`), checked where the
quota is stored: the same words from the CLI, the API and the UI.
"""

from __future__ import annotations

from typing import Any

import click

from runplane.cli.examples import example
from runplane.cli.output import Column, dumped, emit, output_option
from runplane.errors import InvalidValueError
from runplane.placement.quotas import FLAVORS, ON_DEMAND, RESOURCES

EXAMPLE = (
    "runplane project quota team-a --flavor on-demand --cpu 16 --memory 64Gi --gpus 2 "
    "--borrowing-limit gpus=0"
)

QUOTA_COLUMNS = [
    Column("FLAVOR", lambda q: str(q["flavor"])),
    Column("RESOURCE", lambda q: str(q["resource"])),
    Column("USED", lambda q: str(q["used"])),
    Column("NOMINAL", lambda q: "not limited" if q["nominal"] is None else str(q["nominal"])),
    Column("BORROWING LIMIT", lambda q: _limit(q["borrowing_limit"], q["nominal"])),
    Column("LENDING LIMIT", lambda q: _limit(q["lending_limit"], q["nominal"])),
]


def _limit(value: str | None, nominal: str | None) -> str:
    if nominal is None:
        return ""
    return "none" if value is None else str(value)


def quota_rows(view: dict[str, Any]) -> list[dict[str, Any]]:
    """The API's quota view as a row per flavor and resource."""
    return [
        {"flavor": flavor, "resource": resource, **terms}
        for flavor, resources in (view.get("flavors") or {}).items()
        for resource, terms in resources.items()
    ]


def parse_limits(option: str, given: tuple[str, ...]) -> dict[str, str]:
    """``gpus=0 cpu=4`` as ``{'gpus': '0', 'cpu': '4'}``; a resource other than the quota's
    is refused by name."""
    limits = {}
    for pair in given:
        resource, sep, value = pair.partition("=")
        if not sep or resource.strip() not in RESOURCES:
            raise InvalidValueError(
                option,
                pair,
                "RESOURCE=QUANTITY, where RESOURCE is " + ", ".join(RESOURCES),
                f"{option} gpus=0",
            )
        limits[resource.strip()] = value.strip()
    return limits


def flavor_values(
    given: dict[str, str | None],
    borrowing: dict[str, str],
    lending: dict[str, str],
    current: dict[str, Any],
) -> dict[str, Any]:
    """The flavor's quota after the flags: a resource given replaces its quota, a limit given
    alone changes that limit of the quota it has."""
    values: dict[str, dict[str, Any]] = {
        resource: {key: terms.get(key) for key in ("nominal", "borrowing_limit", "lending_limit")}
        for resource, terms in current.items()
        if terms.get("nominal") is not None
    }
    for resource, nominal in given.items():
        if nominal is not None:
            values[resource] = {"nominal": nominal}
    for option, limits, term in (
        ("--borrowing-limit", borrowing, "borrowing_limit"),
        ("--lending-limit", lending, "lending_limit"),
    ):
        for resource, value in limits.items():
            if resource not in values:
                raise InvalidValueError(
                    option,
                    f"{resource}={value}",
                    f"a limit applies to a resource with a quota; give --{resource} too",
                    f"--{resource} 4 {option} {resource}=2",
                )
            values[resource][term] = None if value.lower() == "none" else value
    return {
        resource: {key: value for key, value in terms.items() if value is not None}
        for resource, terms in values.items()
    }


@click.command("quota", epilog=example(EXAMPLE))
@click.argument("name")
@click.option(
    "--flavor",
    type=click.Choice(FLAVORS),
    default=ON_DEMAND,
    show_default=True,
    help="Which capacity: on-demand nodes or spot nodes (this machine: on-demand unless it "
    "carries the spot preset's labels).",
)
@click.option("--cpu", metavar="QUANTITY", help="Nominal CPU quota (16, 500m).")
@click.option("--memory", metavar="QUANTITY", help="Nominal memory quota (64Gi).")
@click.option("--gpus", metavar="N", help="Nominal GPU quota, whole GPUs.")
@click.option(
    "--borrowing-limit",
    metavar="RESOURCE=QUANTITY",
    multiple=True,
    help="How much beyond its quota the project may borrow of others' idle quota (unset: "
    "any; 0: none; 'none' unsets it).",
)
@click.option(
    "--lending-limit",
    metavar="RESOURCE=QUANTITY",
    multiple=True,
    help="How much of its idle quota others may borrow (unset: all; 'none' unsets it).",
)
@click.option("--no-borrowing", is_flag=True, help="Borrowing limit 0 on every resource.")
@click.option("--clear", is_flag=True, help="Drop the quota on this flavor (or on every one).")
@click.option("--all-flavors", is_flag=True, help="With --clear: drop the quota on every flavor.")
@output_option
def quota_command(
    name: str,
    flavor: str,
    cpu: str | None,
    memory: str | None,
    gpus: str | None,
    borrowing_limit: tuple[str, ...],
    lending_limit: tuple[str, ...],
    no_borrowing: bool,
    clear: bool,
    all_flavors: bool,
    output: str,
) -> None:
    """Show project NAME's quotas and what its runs hold, or set or clear them (admins): a
    run its project's quota cannot hold now waits, saying so."""
    given = {"cpu": cpu, "memory": memory, "gpus": gpus}
    borrowing = parse_limits("--borrowing-limit", borrowing_limit)
    lending = parse_limits("--lending-limit", lending_limit)
    changing = any(v is not None for v in given.values()) or borrowing or lending or no_borrowing
    if clear and changing:
        raise click.UsageError("--clear takes no quantities: it drops the quota")
    if all_flavors and not clear:
        raise click.UsageError("--all-flavors goes with --clear")
    from runplane.client import backend

    service = backend()
    if clear:
        view = service.clear_project_quota(name, None if all_flavors else flavor)
    elif changing:
        current = service.project_quotas(name).get("flavors", {}).get(flavor, {})
        values = flavor_values(given, borrowing, lending, current)
        if no_borrowing:
            for terms in values.values():
                terms["borrowing_limit"] = "0"
        view = service.set_project_quota(name, flavor, values)
    else:
        view = service.project_quotas(name)
    _show(name, view, output)


def _show(name: str, view: dict[str, Any], output: str) -> None:
    if output in ("json", "yaml"):
        click.echo(dumped(view, output), nl=output == "json")
        return
    rows = quota_rows(view)
    if not rows:
        click.echo(f"project {name}: no quota (its runs are not limited)")
        return
    click.echo(f"project {name}: quotas")
    emit(rows, QUOTA_COLUMNS, output)


def get_project_command(group: click.Group) -> None:
    @group.command("project", epilog=example("runplane get project team-a -o yaml"))
    @click.argument("name")
    @output_option
    def get_project(name: str, output: str) -> None:
        """Show project NAME: its record, its quotas and what its runs hold against them."""
        from runplane.client import backend

        service = backend()
        record = service.get_project(name)
        view = service.project_quotas(name)
        if output in ("json", "yaml"):
            click.echo(dumped({**record, "quotas": view["flavors"]}, output), nl=output == "json")
            return
        for key in ("name", "owner", "description", "default_image"):
            if record.get(key):
                click.echo(f"{key}: {record[key]}")
        for key in ("labels", "retention"):
            if record.get(key):
                shown = ", ".join(f"{k}={v}" for k, v in record[key].items())
                click.echo(f"{key}: {shown}")
        rows = quota_rows(view)
        if not rows:
            click.echo("quotas: none (its runs are not limited)")
            return
        click.echo("quotas:")
        emit(rows, QUOTA_COLUMNS, output)

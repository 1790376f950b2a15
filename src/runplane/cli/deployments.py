"""``runplane get deployments`` and ``runplane delete deployment``: serving functions where
runs go (see :func:`runplane.client.backend`), here or through the service."""

from __future__ import annotations

import json

import click


@click.command("deployments")
@click.option("--project", help="Only this project's deployments.")
@click.option("--json", "as_json", is_flag=True, help="Print the full status as JSON.")
def get_deployments(project: str | None, as_json: bool) -> None:
    """List serving functions deployed here, or through the service (RUNPLANE_API): replicas,
    restarts, scaling."""
    from rich.table import Table

    from runplane.cli.runs import terminal
    from runplane.client import backend

    found = backend().deployments(project)
    if as_json:
        click.echo(json.dumps(found, indent=1))
        return
    table = Table(box=None, header_style="bold")
    for column in ("project", "name", "state", "ready", "replicas", "restarts", "url", "scaling"):
        table.add_column(column)
    for status in found:
        replicas = status.get("replicas") or []
        ready = status.get("ready", sum(1 for r in replicas if r["state"] == "ready"))
        bounds = (
            f" ({status['min_replicas']}-{status['max_replicas']})"
            if status.get("max_replicas")
            else ""
        )
        workers = f" x {status['workers']} worker(s)" if status.get("workers") else ""
        table.add_row(
            status["project"],
            status["name"],
            status["state"],
            f"{ready}/{status['desired']}",
            f"{status['desired']}{bounds}{workers}",
            str(sum(replica["restarts"] for replica in replicas)) if replicas else "",
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
    """Stop a serving function deployed here (or through the service) and remove it."""
    from runplane.client import backend

    service = backend()
    if project is None:
        matches = sorted({d["project"] for d in service.deployments() if d["name"] == name})
        project = _one_project(name, matches)
    click.echo(f"{service.delete_deployment(project, name)} deleted")


def _one_project(name: str, projects: list[str]) -> str:
    from runplane.errors import InvalidValueError, NotFoundError

    if not projects:
        raise NotFoundError(
            f"deployment {name!r} does not exist here, or is not yours (runplane get "
            "deployments lists those you may use)"
        )
    if len(projects) > 1:
        raise InvalidValueError(
            "project",
            None,
            f"deployments named {name!r} exist in projects {', '.join(projects)}; name one",
            f"runplane delete deployment {name} --project {projects[0]}",
        )
    return projects[0]

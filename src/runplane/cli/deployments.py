"""``runplane delete deployment``: a serving function stopped and removed where runs go (see
:func:`runplane.client.backend`), here or through the service (``get deployments`` lists
them: :mod:`runplane.cli.lists`)."""

from __future__ import annotations

import click

from runplane.cli.examples import example


@click.group("delete", epilog=example("runplane delete deployment echo --project default"))
def delete_group() -> None:
    """Remove an object."""


@delete_group.command(
    "deployment", epilog=example("runplane delete deployment echo --project default")
)
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

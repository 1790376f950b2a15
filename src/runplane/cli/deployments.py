"""``runplane invoke`` and ``runplane delete deployment``: a serving function called, or stopped
and removed, where runs go (see :func:`runplane.client.backend`), here or through the service
(``get deployments`` lists them: :mod:`runplane.cli.lists`)."""

from __future__ import annotations

import json
from pathlib import Path

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


@click.command("invoke", epilog=example("""runplane invoke echo /predict --body '{"x": 21}'"""))
@click.argument("name")
@click.argument("path", default="/")
@click.option(
    "--body",
    help="The request's body: JSON is sent as application/json, anything else as text; "
    "@FILE sends a file's bytes.",
)
@click.option(
    "--method",
    type=click.Choice(["GET", "POST", "PUT", "PATCH", "DELETE"], case_sensitive=False),
    help="The HTTP method (default: POST with a body, else GET).",
)
@click.option("--project", help="The function's project, when several have one of that name.")
@click.option(
    "--timeout",
    type=click.FloatRange(0, 600, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds to await the answer.",
)
def invoke_command(
    name: str, path: str, body: str | None, method: str | None, project: str | None, timeout: float
) -> None:
    """Call a serving function deployed here (or through the service, which checks your token
    and sends the call on) and print its answer; an answer of 400 or more is an error, as for
    fn.invoke()."""
    from runplane.client import backend
    from runplane.client.serving import InvokeError, ServingRequest, request_of

    service = backend()
    if project is None:
        matches = sorted({d["project"] for d in service.deployments() if d["name"] == name})
        project = _one_project(name, matches)
    request: ServingRequest = {"path": path, "method": method.upper() if method else None}
    request["timeout"] = timeout
    if body is not None:
        request["body"] = _body(body)
    answer = service.invoke(project, name, request_of(request))
    text = answer.body.decode("utf-8", errors="replace")
    if answer.status >= 400:
        raise InvokeError(answer.status, text)
    click.echo(text)


def _body(given: str) -> object:
    """``@FILE``'s bytes, else the parsed JSON, else the text."""
    if given.startswith("@"):
        return Path(given[1:]).read_bytes()
    try:
        return json.loads(given)
    except ValueError:
        return given


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

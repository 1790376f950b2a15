"""Entry point: dispatches commands and turns errors into a message and the exit code the
convention gives them (:mod:`runplane.cli.exits`), in one place: :func:`exit_code_of`."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from runplane.cli.budgets import budget_command
from runplane.cli.completion import completion_command
from runplane.cli.deployments import delete_group, invoke_command
from runplane.cli.examples import example
from runplane.cli.exits import BY_HTTP_STATUS, ExitCode
from runplane.cli.labels import label_group
from runplane.cli.lists import (
    get_deployments_command,
    get_functions_command,
    get_nodes_commands,
    get_projects_command,
    get_schedules_command,
)
from runplane.cli.options import (
    apply_resource_options,
    in_cli_words,
    load_function,
    resource_options,
)
from runplane.cli.projects import project_group
from runplane.cli.quotas import get_project_command, quota_command
from runplane.cli.run_list import runs_command
from runplane.cli.runs import (
    abort_command,
    get_group,
    logs_command,
    resize_command,
    run_command,
)
from runplane.cli.service import deploy_command, schedule_group
from runplane.cli.serving import serve, ui_command
from runplane.cli.sizing import cost_command
from runplane.errors import (
    AmbiguousError,
    ArgumentError,
    ConfigError,
    NotFoundError,
    OutOfScopeError,
    PolicyError,
    RunExistsError,
    RunFailedError,
    RunFinishedError,
    RunplaneError,
)

#: runplane's errors (:mod:`runplane.errors`) as exit codes; the first class an error is an
#: instance of decides.
BY_ERROR: list[tuple[type[RunplaneError], ExitCode]] = [
    (RunFailedError, ExitCode.RUN_FAILED),
    (NotFoundError, ExitCode.NOT_FOUND),
    (PolicyError, ExitCode.REFUSED),
    (AmbiguousError, ExitCode.CONFLICT),
    (RunExistsError, ExitCode.CONFLICT),
    (RunFinishedError, ExitCode.CONFLICT),
    (ArgumentError, ExitCode.USAGE),
    (ConfigError, ExitCode.USAGE),
    (OutOfScopeError, ExitCode.USAGE),
]


def exit_code_of(error: RunplaneError) -> ExitCode:
    """The exit code of a command that ``error`` stopped. The service's refusals (through
    ``RUNPLANE_API``) carry their HTTP status, which says the same as the local classes."""
    from runplane.client.remote import ApiError

    if isinstance(error, ApiError):
        status = error.http_status
        return BY_HTTP_STATUS.get(status, ExitCode.UNREACHABLE if status >= 500 else ExitCode.USAGE)
    for kind, code in BY_ERROR:
        if isinstance(error, kind):
            return code
    return BY_HTTP_STATUS.get(error.http_status, ExitCode.USAGE)


def configure_logging(verbose: bool) -> None:
    """What runplane's modules log, on stderr: the one logging setup of a runplane command.

    The SDK configures nothing (a library leaves that to the program using it); a command
    shows warnings, and with ``--verbose`` everything.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("runplane")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False


@click.group(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=example(
        "runplane run train.py --handler train --cpu 1 --memory 1Gi",
        "runplane runs -w",
        "runplane get nodes -o wide",
    ),
)
@click.version_option(package_name="runplane")
@click.option("--api", metavar="URL", help="Use the runplane service at URL (RUNPLANE_API).")
@click.option("-v", "--verbose", is_flag=True, help="Log what runplane does, not only warnings.")
def cli(api: str | None, verbose: bool) -> None:
    """Run Python functions as jobs and services with explicit, correct resources."""
    configure_logging(verbose)
    if api:
        import os

        from runplane.config import current

        os.environ["RUNPLANE_API"] = api
        current.cache_clear()


@cli.command(
    epilog=example("runplane render train.py --handler train --gpus 1 | kubectl apply -f -")
)
@click.argument("source")
@click.option("--name", help="Function name (default: the file name).")
@click.option("--handler", help="Function in the file to run.")
@click.option(
    "--kind",
    type=click.Choice(["job", "serving", "nuclio", "mpijob", "dask", "spark"]),
    help="Function kind (docs/runtimes.md).",
)
@resource_options
def render(
    source: str, name: str | None, handler: str | None, kind: str | None, **options: Any
) -> None:
    """Print the Kubernetes manifests SOURCE (function.yaml or a .py file) renders to.

    The Secrets and ConfigMap the workload needs come first, so ``kubectl apply -f`` creates
    them before it. The QoS class and warnings follow as YAML comments, so the output stays
    valid YAML. Secret values are redacted.
    """
    from runplane.config import current
    from runplane.rendering import render as render_function
    from runplane.rendering.text import manifests_yaml

    fn = apply_resource_options(load_function(source, name, handler, kind), options)
    rendered = render_function(fn, current())
    workload, *needed = rendered.manifests  # what the workload needs comes first, for kubectl
    click.echo(manifests_yaml([*needed, workload]), nl=False)
    click.echo(f"# QoS class: {rendered.qos.value}")
    for lint in rendered.lints:
        click.echo(f"# {lint}")


for _command in (
    run_command,
    runs_command,
    get_group,
    logs_command,
    abort_command,
    resize_command,
    schedule_group,
    deploy_command,
    invoke_command,
    serve,
    ui_command,
    delete_group,
    cost_command,
    label_group,
    project_group,
    completion_command,
):
    cli.add_command(_command)
project_group.add_command(budget_command)
for _add in (
    get_functions_command,
    get_schedules_command,
    get_projects_command,
    get_project_command,
    get_deployments_command,
    get_nodes_commands,
):
    _add(get_group)
project_group.add_command(quota_command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="runplane", standalone_mode=False)
    except RunplaneError as error:
        click.echo(f"error: {in_cli_words(error)}", err=True)
        sys.exit(exit_code_of(error))
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(ExitCode.INTERRUPTED)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)


if __name__ == "__main__":
    main()

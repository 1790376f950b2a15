"""Entry point: dispatches commands and turns user errors into a message and exit code 2."""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from runplane.cli.options import (
    apply_resource_options,
    in_cli_words,
    load_function,
    resource_options,
)
from runplane.cli.runs import abort_command, get_group, logs_command, run_command, runs_command
from runplane.cli.service import deploy_command, schedule_group
from runplane.cli.sizing import cost_command
from runplane.errors import RunplaneError

REDACTED = "<redacted>"


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


def _redacted(manifest: dict[str, Any]) -> dict[str, Any]:
    if manifest.get("kind") != "Secret":
        return manifest
    hidden = {key: REDACTED for key in manifest.get("stringData", {})}
    return {**manifest, "stringData": hidden}


@cli.command()
@click.argument("source")
@click.option("--name", help="Function name (default: the file name).")
@click.option("--handler", help="Function in the file to run.")
@click.option("--kind", type=click.Choice(["job", "serving"]), help="Function kind.")
@resource_options
def render(
    source: str, name: str | None, handler: str | None, kind: str | None, **options: Any
) -> None:
    """Print the Kubernetes manifests SOURCE (function.yaml or a .py file) renders to.

    The Secrets and ConfigMap the workload needs come first, so ``kubectl apply -f`` creates
    them before it. The QoS class and warnings follow as YAML comments, so the output stays
    valid YAML. Secret values are redacted.
    """
    import yaml

    from runplane.config import current
    from runplane.rendering import render as render_function

    class Dumper(yaml.SafeDumper):
        """Multi-line strings (the bootstrap program) as literal blocks, readable as code."""

    def string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, string)
    fn = apply_resource_options(load_function(source, name, handler, kind), options)
    rendered = render_function(fn, current())
    workload, *needed = rendered.manifests  # what the workload needs comes first, for kubectl
    documents = [_redacted(m) for m in [*needed, workload]]
    click.echo(yaml.dump_all(documents, Dumper=Dumper, sort_keys=False), nl=False)
    click.echo(f"# QoS class: {rendered.qos.value}")
    for lint in rendered.lints:
        click.echo(f"# {lint}")


@cli.command()
@click.option("--host", help="Address to listen on (default: service.host).")
@click.option("--port", type=int, help="Port to listen on (default: service.port).")
def serve(host: str | None, port: int | None) -> None:
    """Serve the runplane API (runs, functions, schedules, defaults) over HTTP."""
    import uvicorn

    from runplane.config import current
    from runplane.errors import ConfigError
    from runplane.service.api import create_app
    from runplane.service.server import Server

    settings = current()
    if not settings.service.tokens:
        raise ConfigError(
            "service.tokens is empty, so nobody could use the API; set for example "
            'RUNPLANE_SERVICE__TOKENS=\'[{"token": "<secret>", "user": "me", '
            '"role": "admin"}]\''
        )
    service_log = logging.getLogger("runplane.serve")
    if not service_log.isEnabledFor(logging.INFO):  # a service says what it is doing
        logging.getLogger("runplane").setLevel(logging.INFO)
    server = Server(settings)
    found = server.reconciliation
    service_log.info(
        "runs execute on the %s runtime; at start %d run(s) were launched again, %d were lost, "
        "%d unknown run(s) had objects",
        server.runs.runtime.name,
        len(found.resubmitted),
        len(found.lost),
        len(found.orphans),
    )
    try:
        # On SIGTERM (or Ctrl-C) uvicorn stops accepting and finishes the requests under way;
        # then, as the app shuts down, runs executing here get service.shutdown_grace seconds
        # before they are aborted, and queued ones wait for the next start.
        uvicorn.run(
            create_app(server, shutdown_grace=settings.service.shutdown_grace),
            host=host or settings.service.host,
            port=port or settings.service.port,
            log_level="info",
        )
    finally:
        server.close()  # when uvicorn could not start; after a shutdown it is closed already


for _command in (
    run_command,
    runs_command,
    get_group,
    logs_command,
    abort_command,
    schedule_group,
    deploy_command,
    cost_command,
):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="runplane", standalone_mode=False)
    except RunplaneError as error:
        click.echo(f"error: {in_cli_words(error)}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)


if __name__ == "__main__":
    main()

"""``runplane run``, ``runs``, ``get run``, ``logs`` and ``abort``: on the embedded default, or on
the service ``RUNPLANE_API`` / ``--api`` names."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from runplane.cli.completion import complete_uid
from runplane.cli.detail import mebibytes, span
from runplane.cli.examples import example
from runplane.cli.exits import ExitCode
from runplane.cli.options import (
    apply_resource_options,
    load_function,
    resource_options,
    run_options,
)
from runplane.runs import RunState
from runplane.runtimes.resizing import described

if TYPE_CHECKING:
    from runplane.client import Backend
    from runplane.config import Settings
    from runplane.runs import RunRecord
    from runplane.spec.run_options import RunOptions


def terminal(stderr: bool = False) -> Any:
    """A rich console; when the output is not a terminal (a pipe, a file, CI's log) lines
    keep their length instead of being wrapped at 80 columns."""
    from rich.console import Console

    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=100_000, soft_wrap=True)
    return console


def _service() -> Backend:
    from runplane.client import backend

    return backend()


STATE_STYLE = {
    RunState.COMPLETED: "green",
    RunState.ERROR: "red",
    RunState.ABORTED: "yellow",
    RunState.RUNNING: "cyan",
    RunState.PENDING: "magenta",
    RunState.ABORTING: "yellow",
    RunState.CREATED: "white",
}


def _summary(record: RunRecord) -> Any:
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_row("run", record.uid)
    style = STATE_STYLE[record.state]
    table.add_row(
        "state", f"[{style}]{record.state}[/]" + (f" ({record.reason})" if record.reason else "")
    )
    if record.status_text:
        table.add_row("status", record.status_text)
    end = record.ended_at or time.time()
    table.add_row("duration", span(end - record.created_at))
    if record.results:
        table.add_row("results", ", ".join(f"{k}={v}" for k, v in record.results.items()))
    for artifact in record.artifacts:
        table.add_row("artifact", f"{artifact['key']}: {artifact['path']}")
    # Every measured run has a memory peak; none means nothing measured it (a cluster without a
    # metrics source), which is not the same as using nothing.
    usage = (
        f"peak memory {mebibytes(record.peak_memory_bytes)}, cpu {record.cpu_seconds:.2f}s"
        if record.peak_memory_bytes
        else "not measured"
    )
    table.add_row("usage", usage)
    return table


@click.command(
    "run",
    epilog=example("runplane run train.py --handler train --param epochs=3 --memory 1Gi"),
)
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("--handler", help="Function in the file to call.")
@click.option("--name", help="Function name (default: the file name).")
@run_options
@click.option(
    "--kind",
    type=click.Choice(["job", "mpijob", "spark"]),
    help="Function kind (for a .py file; default job). See docs/runtimes.md.",
)
@resource_options
@click.option(
    "--estimate",
    is_flag=True,
    help="Print what the run is expected to cost and its project's budget; run nothing.",
)
def run_command(
    source: str,
    handler: str | None,
    name: str | None,
    kind: str | None,
    given: RunOptions,
    estimate: bool = False,
    **options: Any,
) -> None:
    """Run a function from SOURCE (a .py file or function.yaml).

    The run goes to the service at RUNPLANE_API when that is set, else it runs on this
    machine. The command follows the run until it ends and exits 0 if it completed, 1 otherwise
    (docs/cli.md lists every exit code); Ctrl-C aborts the run.
    """

    fn = apply_resource_options(load_function(source, name, handler, kind), options)
    service = _service()
    if estimate:
        from runplane.cli.budgets import estimate_lines

        click.echo("\n".join(estimate_lines(service.estimate(fn))))
        return
    uid = service.submit(fn, given, source_dir=str(Path(source).resolve().parent)).uid
    console = terminal(stderr=True)
    signal.signal(signal.SIGTERM, _interrupted)  # a stopped command aborts its run, as Ctrl-C
    try:
        record = _follow(service, uid, console)
    except KeyboardInterrupt:
        service.abort(uid)
        record = service.wait(uid, timeout=30)
    terminal().print(_summary(record))
    sys.exit(ExitCode.DONE if record.state is RunState.COMPLETED else ExitCode.RUN_FAILED)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _follow(service: Backend, uid: str, console: Any) -> RunRecord:
    """Show state, reason and elapsed time (live on a terminal, as lines otherwise), and the
    run's output as it comes."""
    from rich.live import Live
    from rich.text import Text

    from runplane.client import follow

    shown = ("", "")
    live = Live(
        console=console, refresh_per_second=8, transient=True, auto_refresh=console.is_terminal
    )
    with live:
        for record, chunk in follow(service, uid):
            if chunk:
                live.console.print(chunk, end="", markup=False, highlight=False)
            style = STATE_STYLE[record.state]
            elapsed = span(time.time() - record.created_at)
            if console.is_terminal:
                live.update(
                    Text.assemble(
                        (record.state, style),
                        f"  {elapsed}",
                        f"  {record.status_text}" if record.status_text else "",
                    )
                )
            elif (record.state, record.status_text) != shown:
                shown = (record.state, record.status_text)
                console.print(f"[{style}]{record.state}[/] {elapsed} {record.status_text}")
    return record


def _what_it_got(record: RunRecord, settings: Settings) -> list[tuple[str, str]]:
    """The run's settings as its pod got them, as the run's page says them; nothing where its
    function no longer renders (a setting since refused)."""
    from runplane.errors import RunplaneError
    from runplane.rendering import RunRef, render
    from runplane.rendering.summary import summary
    from runplane.spec.function import Function

    try:
        attempt = record.attempts[-1].number if record.attempts else 1
        rendered = render(
            Function.from_dict(record.function), settings, run=RunRef(record.uid, attempt)
        )
    except RunplaneError:
        return []
    return summary(record, rendered.pod_spec, rendered.qos.value)


@click.group("get", epilog=example("runplane get nodes", "runplane get run 3f2a9c"))
def get_group() -> None:
    """Show objects: lists of them (runs, functions, nodes...), or one in detail."""


@get_group.command("run", epilog=example("runplane get run 3f2a9c -o yaml"))
@click.argument("uid", shell_complete=complete_uid)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "yaml", "json"]),
    default="table",
    show_default=True,
    help=(
        "table: a summary, what it got (placement, resources, volumes, variables), the "
        "attempts and the transitions; yaml or json: the whole record."
    ),
)
def get_run(uid: str, output: str) -> None:
    """Show a run: its state, attempts, transitions, results and usage."""
    service = _service()
    record = service.get(uid)
    usage = None
    if not record.finished:
        live = service.usage(record.uid)
        usage = (live.peak_memory_bytes, live.cpu_seconds)
    if output == "table":
        from runplane.cli.detail import run_detail
        from runplane.config import current
        from runplane.service.costs import configured, run_cost

        groups, on_demand = configured(current())
        cost = run_cost(record, groups, on_demand) if record.finished else None
        console = terminal()
        got = _what_it_got(record, current())
        for part in run_detail(record, usage, cost.describe() if cost else "", got):
            console.print(part)
        return
    data = record.to_json()
    data.pop("function")
    if usage is not None:
        data["peak_memory_bytes"], data["cpu_seconds"] = usage
    if output == "json":
        import json

        click.echo(json.dumps(data, indent=2))
        return
    import yaml

    for transition in data["transitions"]:
        transition["at"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(transition["at"]))
    click.echo(yaml.safe_dump(data, sort_keys=False), nl=False)


@click.command("logs", epilog=example("runplane logs -f 3f2a9c"))
@click.argument("uid", shell_complete=complete_uid)
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the run ends.")
def logs_command(uid: str, follow: bool) -> None:
    """Print a run's output."""
    from runplane.client import follow as follow_run
    from runplane.client import output

    service = _service()
    uid = service.get(uid).uid  # a unique prefix is accepted; refuse an unknown one here
    if not follow:
        for text in output(service, uid):
            sys.stdout.write(text)
        return
    for _, chunk in follow_run(service, uid, interval=0.2):
        sys.stdout.write(chunk)
        sys.stdout.flush()


@click.command(
    "resize",
    epilog=example("runplane resize 3f2a9c --mem 4Gi --cpu 2", "runplane resize 3f2a9c --mem 1Gi"),
)
@click.argument("uid", shell_complete=complete_uid)
@click.option("--mem", default=None, help="The new memory limit (a quantity: 512Mi, 4Gi).")
@click.option("--cpu", default=None, help="The new CPU limit (a quantity: 500m, 2).")
def resize_command(uid: str, mem: str | None, cpu: str | None) -> None:
    """Change a running job's memory and CPU limits in place, without restarting it.

    Its requests grow by as much as its limits. Refused, with the reason, where the run is not
    running, its kind has several processes or pods, or its node cannot grant the size.
    """
    record = _service().resize(uid, mem, cpu)
    click.echo(f"{uid} {described(record)}")


@click.command("abort", epilog=example("runplane abort 3f2a9c"))
@click.argument("uid", shell_complete=complete_uid)
def abort_command(uid: str) -> None:
    """Abort a pending or running run."""
    service = _service()
    record = service.abort(uid)
    record = service.wait(record.uid, timeout=30)
    click.echo(
        f"{record.uid} {record.state}" + (f": {record.status_text}" if record.status_text else "")
    )

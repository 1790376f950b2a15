"""``runplane completion bash|zsh|fish``: click's own shell completion (commands, options,
choices), and the run uids and function names that arguments take, from the newest runs.

A completion runs at each Tab press, so it is bounded (the newest :data:`RECENT` runs, a
short timeout through a service), starts no run service (the embedded default's database is
read as it is; one that does not exist yet offers nothing) and never raises: whatever goes
wrong offers no candidates instead of a traceback in the user's prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
from click.shell_completion import CompletionItem, get_completion_class

from runplane.cli.examples import example

if TYPE_CHECKING:
    from runplane.runs import RunRecord

#: How many of the newest runs a completion looks at.
RECENT = 200
#: How long a completion waits for a service, in seconds.
TIMEOUT = 2.0
#: The environment variable click's completion protocol uses for ``runplane``.
COMPLETE_VAR = "_RUNPLANE_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


def _recent_runs() -> list[RunRecord]:
    """The newest runs the user may see, brief; none when they cannot be read quickly."""
    from runplane.config import current

    settings = current()
    if settings.api:
        from runplane.client.remote import ApiBackend

        token = settings.token.get_secret_value() if settings.token else ""
        service = ApiBackend(settings.api, token, timeout=TIMEOUT)
        return service.page(limit=RECENT)[0]
    from runplane.service.db import connect, sqlite_url
    from runplane.service.records import RunStore

    database = settings.local.home / "runplane.db"
    if not database.is_file():
        return []
    return RunStore(connect(sqlite_url(database))).list_runs(limit=RECENT, brief=True)


def _candidates(make: Any) -> list[CompletionItem]:
    try:
        items: list[CompletionItem] = make(_recent_runs())
    except Exception:  # a prompt shows no traceback: no candidates instead
        return []
    return items


def complete_uid(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Uids of the newest runs that start with what is typed; each says its function and
    state (shells that show help do)."""
    return _candidates(
        lambda runs: [
            CompletionItem(run.uid, help=f"{run.project}/{run.name} {run.state}")
            for run in runs
            if run.uid.startswith(incomplete)
        ]
    )


def complete_function(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """Names of the functions of the newest runs that start with what is typed."""
    return _candidates(
        lambda runs: [
            CompletionItem(name)
            for name in sorted({run.name for run in runs})
            if name.startswith(incomplete)
        ]
    )


@click.command(
    "completion",
    epilog=example('eval "$(runplane completion bash)"  # in ~/.bashrc'),
)
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion_command(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for SHELL: commands, options, run uids and function
    names complete on Tab. Load it in the shell's start-up file, e.g. for bash
    `eval "$(runplane completion bash)"`, for zsh the same with zsh, for fish
    `runplane completion fish | source`."""
    root = ctx.find_root().command
    completer = get_completion_class(shell)
    assert completer is not None  # one of click's own shells
    click.echo(completer(root, {}, "runplane", COMPLETE_VAR).source())

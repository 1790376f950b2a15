"""docs/cli.md, written from the commands' own help: ``python -m runplane.cli.docs >
docs/cli.md``. A test compares the committed page with this output, so the page cannot say
what the commands do not."""

from __future__ import annotations

from collections.abc import Iterator

import click

from runplane.cli.exits import MEANING
from runplane.cli.main import cli

#: The width help is formatted to, whatever the terminal that generates the page.
WIDTH = 100

INTRODUCTION = """\
# The command line

`runplane` runs functions as jobs and services, lists what runs and where, and shows the
nodes runs go to. Every command works where runs go: on this machine (the embedded default)
or, with `RUNPLANE_API` (or `--api URL`) and `RUNPLANE_TOKEN` set, through a `runplane serve`,
with the same output either way.

This page is generated from the commands' own `--help` by
`python -m runplane.cli.docs > docs/cli.md`; a test fails when it differs.

## Conventions

**Output.** Every list (`runs`, `get functions`, `get schedules`, `get projects`,
`get deployments`, `get nodes`) takes `-o table|wide|json|yaml`. `table` is kubectl's: a header
and a line per object, columns padded; `wide` adds columns. `json` and `yaml` print the API's
own objects, the shape `GET /api/v1/...` answers with (a test validates them against the API's
OpenAPI schema), so a script reads the same fields on either backend.

**Filters.** `-l/--selector key=value` (repeatable: all must match) where objects have labels
(a run or stored function: its function's labels; a project's; a node's), `--name` (the whole
name), `--owner`, and `--since` (a duration ago, `2h` or `'1 day'`, or an ISO 8601 time; any
other value is a usage error that says so). Runs are filtered by the service's listing (a
user's own runs only; `--owner` is for admins); the other lists are filtered as read.

**Watching.** `runplane runs -w` prints the table, then a line per change of a run it lists,
under the same columns, until Ctrl-C (exit 0). It asks for the runs changed since the latest
change it has seen (`GET /api/v1/runs?updated_since=`), twice a second. With `-o json` each
change is one JSON object per line; with `-o yaml` a YAML document.

**Completion.** `runplane completion bash|zsh|fish` prints click's completion script; Tab then
completes commands, options, choices, the uids of the newest runs (`get run`, `logs`,
`abort`, `cost`) and function names (`get function`, `runs --name`). A completion reads at
most the newest 200 runs, waits at most 2 seconds for a service, and offers nothing rather
than fail.

**Exit codes.** Every command keeps one convention:

| code | meaning |
|-----:|---------|
"""


def commands(
    command: click.Command, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """The command and those under it, depth first, by name."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, (*path, name))


def help_of(command: click.Command, path: tuple[str, ...]) -> str:
    context = click.Context(
        command,
        info_name=" ".join(path),
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        **cli.context_settings,  # -h as well as --help, as every command takes
    )
    with context:
        return command.get_help(context).rstrip()


def page() -> str:
    """The whole of docs/cli.md: the conventions, then a section per command group (a
    command with no subcommands is a group of one)."""
    parts = [INTRODUCTION.rstrip("\n")]
    parts += [f"| {int(code)} | {meaning} |" for code, meaning in MEANING.items()]
    parts += ["", "## runplane", "", "```text", help_of(cli, ("runplane",)), "```"]
    for name, top in sorted(cli.commands.items()):
        for path, command in commands(top, ("runplane", name)):
            heading = "##" if len(path) == 2 else "###"
            parts += ["", f"{heading} {' '.join(path)}", "", "```text"]
            parts += [help_of(command, path), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    click.echo(page(), nl=False)

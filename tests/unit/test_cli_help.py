"""Every command's ``--help`` ends with an example of it."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest

from runplane.cli.main import cli


def commands(
    command: click.Command = cli, path: tuple[str, ...] = ("runplane",)
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from commands(sub, (*path, name))


@pytest.mark.parametrize(
    ("path", "command"), list(commands()), ids=[" ".join(p) for p, _ in commands()]
)
def test_help_ends_with_an_example(path: tuple[str, ...], command: click.Command) -> None:
    with click.Context(command, info_name=" ".join(path)) as ctx:
        shown = command.get_help(ctx).rstrip().splitlines()
    start = [line.strip() for line in shown].index("Example:")
    examples = [line.strip() for line in shown[start + 1 :]]
    assert examples, path
    assert all(line.startswith(("runplane ", "eval ")) for line in examples), examples
    if len(path) > 1:  # the example uses the command it is the help of
        assert any(" ".join(path[1:]) in line for line in examples), (path, examples)

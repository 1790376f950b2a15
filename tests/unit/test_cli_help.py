"""Every command's ``--help`` ends with an example of it."""

from __future__ import annotations

import click
import pytest

from runplane.cli.docs import commands, help_of
from runplane.cli.main import cli

EVERY = list(commands(cli, ("runplane",)))


@pytest.mark.parametrize(("path", "command"), EVERY, ids=[" ".join(p) for p, _ in EVERY])
def test_help_ends_with_an_example(path: tuple[str, ...], command: click.Command) -> None:
    shown = help_of(command, path).splitlines()
    start = [line.strip() for line in shown].index("Example:")
    examples = [line.strip() for line in shown[start + 1 :]]
    assert examples, path
    assert all(line.startswith(("runplane ", "eval ")) for line in examples), examples
    if len(path) > 1:  # the example uses the command it is the help of
        assert any(" ".join(path[1:]) in line for line in examples), (path, examples)


def test_the_cli_page_is_what_the_commands_say() -> None:
    """docs/cli.md is generated from the commands' help; regenerate it after changing one:
    ``python -m runplane.cli.docs > docs/cli.md``."""
    from pathlib import Path

    from runplane.cli.docs import page

    committed = Path(__file__).parents[2] / "docs" / "cli.md"
    assert committed.read_text() == page(), "python -m runplane.cli.docs > docs/cli.md"

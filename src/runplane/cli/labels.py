"""``runplane label node NAME key=value key-``: an admin's change to a node's labels, in
kubectl's words.

The change goes where runs go (see :func:`runplane.client.backend`): with ``RUNPLANE_API`` the
service makes it (``PATCH /api/v1/cluster/nodes/NAME``, admins only), on its cluster's Node
object or its own machine; without it, the embedded default labels this machine (its stored
labels, which every runplane process here places runs on from its next start).
"""

from __future__ import annotations

import click

from runplane.cli.examples import example
from runplane.errors import InvalidValueError

EXAMPLE = "runplane label node NAME runplane.io/pool=training old-label-"


def parse_changes(changes: tuple[str, ...]) -> dict[str, str | None]:
    """``key=value`` sets a label, ``key-`` removes it (as ``kubectl label`` reads them)."""
    parsed: dict[str, str | None] = {}
    for change in changes:
        key, equals, value = change.partition("=")
        if equals:
            parsed[key] = value
        elif change.endswith("-") and len(change) > 1:
            parsed[change[:-1]] = None
        else:
            raise InvalidValueError(
                "label", change, "key=value to set a label, key- to remove it", EXAMPLE
            )
    if not parsed:
        raise InvalidValueError("label", None, "at least one key=value or key-", EXAMPLE)
    return parsed


@click.group("label", epilog=example(EXAMPLE))
def label_group() -> None:
    """Change labels (admins)."""


@label_group.command("node", epilog=example(EXAMPLE))
@click.argument("name")
@click.argument("changes", nargs=-1, metavar="KEY=VALUE|KEY-...")
def label_node_command(name: str, changes: tuple[str, ...]) -> None:
    """Set (KEY=VALUE) or remove (KEY-) labels of node NAME; prints its labels after."""
    change = parse_changes(changes)
    from runplane.client import backend

    labels = backend().label_node(name, change)
    for key, value in sorted(labels.items()):
        click.echo(f"{key}={value}")

"""Views of a rendered pod without what runplane adds to every pod (its bootstrap and run
directory), for tests about what a function asked for."""

from __future__ import annotations

from typing import Any

from runplane import names


def theirs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The volumes or volume mounts that are not runplane's own."""
    return [item for item in items if not item["name"].startswith(names.OWN)]

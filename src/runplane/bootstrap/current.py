"""The context of the run in this process: the one a handler was called with, or the one a
script or notebook made, for ``get_or_create_ctx``."""

from __future__ import annotations

from .context import Context
from .invocation import Invocation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

#: The context of the run in this process, for ``get_or_create_ctx`` inside a run.
_current: Context | None = None


def current_context() -> Context | None:
    """The context of the handler running in this process, if one is."""
    return _current


def become_current(context: Context | None) -> None:
    """Make ``context`` this process's (``None``: no run's, as a process that has run a
    handler of its own and goes on to serve others wants)."""
    global _current
    _current = context


def make_context(
    name: str, run_dir: Path, params: dict[str, Any] | None = None, project: str = "", uid: str = ""
) -> Context:
    """A context for code that runs outside a run (a script or notebook), kept in
    ``run_dir``; it becomes this process's context."""
    import uuid

    run_dir.mkdir(parents=True, exist_ok=True)
    invocation = Invocation(
        uid or uuid.uuid4().hex, project or "default", name, "", "", "", params=params or {}
    )
    context = Context(invocation, run_dir)
    become_current(context)
    return context

"""What every runtime is given and what it must do: one interface for here and for clusters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One attempt of a run, rendered and checked, ready for a runtime.

    ``manifests`` are the rendered objects (the Pod first, then any Secret it needs);
    ``pod_spec`` is the Pod's spec, for runtimes that execute it themselves.
    """

    uid: str
    project: str
    function: str
    pod_spec: dict[str, Any]
    code: str
    filename: str
    handler: str
    takes_context: bool
    params: dict[str, Any]
    inputs: dict[str, Any]
    priority: int
    submitted: float
    source_dir: str = ""
    attempt: int = 1
    manifests: list[dict[str, Any]] = field(default_factory=list)


class Runtime(Protocol):
    """A backend that executes runs and reports what happens to them as events."""

    def prepare(self, request: RunRequest) -> Any:
        """Check what can be checked before anything is recorded; raise user errors."""

    def submit(self, prepared: Any) -> object:
        """Start (or queue) a prepared run; progress is reported through the listener."""

    def abort(self, uid: str, reason: str = "Aborted", message: str = "") -> bool:
        """Stop a run this runtime holds; ``False`` if it holds none by that uid."""

    def close(self) -> None:
        """Stop watching and release what the runtime holds in this process."""

"""What a runtime reports about a run: one event type for every backend.

The service layer turns events into run records; runtimes never touch the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class RunState(StrEnum):
    CREATED = "created"
    PENDING = "pending"
    RUNNING = "running"
    ABORTING = "aborting"
    COMPLETED = "completed"
    ERROR = "error"
    ABORTED = "aborted"

    @property
    def terminal(self) -> bool:
        return self in (RunState.COMPLETED, RunState.ERROR, RunState.ABORTED)


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run really used, observed while it ran."""

    peak_memory_bytes: int = 0
    cpu_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class RunEvent:
    """A change in a run's life.

    ``state`` is where the run is now; ``reason`` is a short machine word (``Unschedulable``,
    ``OOMKilled``, ``Error``); ``message`` is the human text, e.g. the scheduler's
    ``0/1 nodes are available: ...``. ``condition`` is the finer state that state thresholds
    watch: ``pending_scheduled``, ``pending_not_scheduled``, ``image_pull_backoff`` or
    ``running`` (empty when none applies).
    """

    uid: str
    state: RunState
    condition: str = ""
    reason: str = ""
    message: str = ""
    attempt: int = 1
    node: str = ""
    process_id: int | None = None
    exit_code: int | None = None
    usage: Usage | None = None
    results: dict[str, Any] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    at: float = field(default_factory=time.time)


Listener = Callable[[RunEvent], None]

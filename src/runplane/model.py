"""The run objects MLRun code names: ``RunObject`` (what a run returns), ``RunTemplate`` and
``new_task`` (a task for ``fn.run(task)``), ``HyperParamOptions``, and ``Retry`` with its
``RetryBackoff`` (what ``fn.run(retry=...)`` takes, as an object)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from runplane.client.handle import RunHandle
from runplane.spec.task import HyperParamOptions, RunTemplate, new_task

#: What ``fn.run()`` returns: runplane's run handle.
RunObject = RunHandle


@dataclass(slots=True)
class RetryBackoff:
    """The wait before a run's second attempt (``"30s"``, ``"2m"`` or seconds)."""

    base_delay: str | int | float | None = None


@dataclass(slots=True)
class Retry:
    """How many times a failed run is tried again; checked when a run is given it."""

    count: int = 1
    backoff: RetryBackoff | None = None

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v is not None}


__all__ = ["HyperParamOptions", "Retry", "RetryBackoff", "RunObject", "RunTemplate", "new_task"]

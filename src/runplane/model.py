"""The run objects MLRun code names: ``RunObject`` (what a run returns), ``RunTemplate`` and
``new_task`` (a task for ``fn.run(task)``), ``HyperParamOptions``."""

from __future__ import annotations

from runplane.client.handle import RunHandle
from runplane.spec.task import HyperParamOptions, RunTemplate, new_task

#: What ``fn.run()`` returns: runplane's run handle.
RunObject = RunHandle

__all__ = ["HyperParamOptions", "RunObject", "RunTemplate", "new_task"]

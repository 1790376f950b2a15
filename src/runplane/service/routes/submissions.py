"""The function a request names: sent inline as JSON, or stored, by project and name (and
version). Runs, deployments, schedules and stored functions take it the same way."""

from __future__ import annotations

from typing import Any

import pydantic

from runplane.errors import InvalidValueError
from runplane.service.routes.fields import Name
from runplane.service.server import Server
from runplane.spec.bounds import check_json
from runplane.spec.function import Function
from runplane.spec.run_options import RunOptions

#: A function (or a defaults patch) sent inline, as JSON; its code is bounded on its own.
MAX_FUNCTION_BYTES = 2 << 20


class RunSubmission(RunOptions):
    """A run of an inline function, or of a stored one by name (and version)."""

    function: dict[str, Any] | None = None
    project: Name | None = None
    name: Name | None = None
    version: str | None = pydantic.Field(default=None, max_length=64)


class ScheduleSubmission(RunSubmission):
    schedule: str = pydantic.Field(max_length=128)


def function_of(server: Server, submission: RunSubmission) -> Function:
    """The submission's function: the inline one, checked and bounded, or the stored one."""
    if submission.function is not None:
        if not isinstance(submission.function.get("metadata"), dict):
            raise InvalidValueError(
                "function",
                submission.function,
                "a function has kind, metadata and spec",
                "the output of fn.to_dict()",
            )
        check_json("function", submission.function, MAX_FUNCTION_BYTES, "fn.to_dict()")
        return Function.from_dict(submission.function)
    if submission.project and submission.name:
        stored = server.catalog.get(submission.project, submission.name, submission.version)
        return Function.from_dict(stored.function)
    raise InvalidValueError(
        "function",
        None,
        "give an inline function, or the project and name of a stored one",
        '{"project": "default", "name": "training"}',
    )

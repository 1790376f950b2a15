"""The function a request names: sent inline as JSON, or stored, by project and name (and
version). Runs, deployments, schedules and stored functions take it the same way."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import orjson
import pydantic

from runplane.errors import InvalidValueError
from runplane.service.routes.fields import Name
from runplane.service.server import Server
from runplane.spec.bounds import json_text, plain_json_text
from runplane.spec.function import Function
from runplane.spec.run_options import RunOptions

#: A function (or a defaults patch) sent inline, as JSON; its code is bounded on its own.
MAX_FUNCTION_BYTES = 2 << 20
#: The functions of runs read lately that are kept read (see :class:`FunctionsRead`), and the
#: largest kept: at most a few MiB however large the functions sent.
FUNCTIONS_KEPT = 32
MAX_KEPT_FUNCTION_CHARS = 64 << 10


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
        _checked_text(submission.function)
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


def _checked_text(function: dict[str, Any], text: str | None = None) -> str:
    """An inline function as JSON text, once its shape and size are checked (``text``: its
    text made already, unchecked)."""
    if not isinstance(function.get("metadata"), dict):
        raise InvalidValueError(
            "function",
            function,
            "a function has kind, metadata and spec",
            "the output of fn.to_dict()",
        )
    return json_text("function", function, MAX_FUNCTION_BYTES, "fn.to_dict()", text)


class Read(NamedTuple):
    """A submission's function, and its dict as recorded (``to_dict()``), as JSON, where that
    was made once with the function (:class:`FunctionsRead`)."""

    function: Function
    recorded: bytes | None = None


class FunctionsRead:
    """The functions of runs' submissions, each inline function read (validated into a
    :class:`Function`, and its dict as recorded made) once per user while it is sent again
    as the same JSON.

    A sweep, a schedule or a pipeline's step submits one function many times, and reading it
    and making its dict was a seventh of a submission's CPU in the service. A function read
    here is shared by the runs submitted with it, so nothing that is given one may change it:
    a run's submission reads it (:meth:`~runplane.service.core.RunService.submit` copies a
    function it must change, and records the copy's own dict). The text of the function as
    JSON names it, per user, so that how fast a submission is answered says nothing about what
    another user sent.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: OrderedDict[tuple[str, str], Read] = OrderedDict()

    def __call__(self, server: Server, submission: RunSubmission, user: str) -> Read:
        """:func:`function_of` the submission, not to be changed. A function kept was checked
        when it was read, and a JSON text equal to its text is an equal value: found so, it is
        not walked again for its depth and size."""
        if submission.function is None:
            return Read(function_of(server, submission))
        plain = _plain_text(submission.function)
        read = self._kept(user, plain)
        if read is not None:
            return read
        text = _checked_text(submission.function, plain)
        if len(text) > MAX_KEPT_FUNCTION_CHARS:
            return Read(Function.from_dict(submission.function))
        key = (user, text)
        function = Function.from_dict(submission.function)
        try:
            read = Read(function, orjson.dumps(function.to_dict()))
        except orjson.JSONEncodeError:  # an integer beyond 64 bits: its dict made each time
            read = Read(function)
        with self._lock:
            self._read[key] = read
            if len(self._read) > FUNCTIONS_KEPT:
                self._read.popitem(last=False)
        return read

    def _kept(self, user: str, text: str | None) -> Read | None:
        if text is None:
            return None
        key = (user, text)
        with self._lock:
            read = self._read.get(key)
            if read is not None:
                self._read.move_to_end(key)
            return read


def _plain_text(function: dict[str, Any]) -> str | None:
    """The function as JSON text, unchecked; ``None`` where it is no JSON (the check says
    why)."""
    try:
        return plain_json_text(function)
    except (TypeError, ValueError, RecursionError):
        return None

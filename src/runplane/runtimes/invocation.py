"""What a run's own process needs to call the handler, and its two encodings.

A local run's process reads it from a JSON file, a pod's container from its environment. Both
are written and read here, so the two backends hand a handler exactly the same call.

Loaded in every run's process, before the handler: standard library only, and a plain class
rather than a dataclass, since ``dataclasses`` and ``typing`` alone would add about a fifth to a
short run's start.
"""

from __future__ import annotations

import base64
import json
import os

from runplane import names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

_FIELDS = (
    "uid",
    "project",
    "function",
    "handler",
    "code",
    "filename",
    "takes_context",
    "params",
    "inputs",
    "attempt",
)
_ENV = {
    "uid": names.ENV_RUN_UID,
    "attempt": names.ENV_ATTEMPT,
    "project": names.ENV_PROJECT,
    "function": names.ENV_FUNCTION,
    "handler": names.ENV_HANDLER,
    "code": names.ENV_CODE,
    "filename": names.ENV_FILENAME,
    "takes_context": names.ENV_TAKES_CONTEXT,
    "params": names.ENV_PARAMS,
    "inputs": names.ENV_INPUTS,
}


class Invocation:
    """One call of a handler: the code it lives in, and the arguments, already converted."""

    __slots__ = _FIELDS

    def __init__(
        self,
        uid: str,
        project: str,
        function: str,
        handler: str,
        code: str,
        filename: str,
        takes_context: bool = True,
        params: dict[str, Any] | None = None,
        inputs: dict[str, str] | None = None,
        attempt: int = 1,
    ) -> None:
        self.uid = uid
        self.project = project
        self.function = function
        self.handler = handler
        self.code = code
        self.filename = filename
        self.takes_context = takes_context
        self.params: dict[str, Any] = dict(params or {})
        self.inputs: dict[str, str] = dict(inputs or {})
        self.attempt = attempt

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Invocation) and self.to_json() == other.to_json()

    def __hash__(self) -> int:
        return hash((self.uid, self.attempt))

    def __repr__(self) -> str:
        return f"Invocation({self.function}.{self.handler}, run {self.uid}, attempt {self.attempt})"

    @property
    def module_name(self) -> str:
        """The name the handler's module is loaded under (``train.py`` loads as ``train``)."""
        stem = os.path.splitext(os.path.basename(self.filename))[0]
        return stem.replace("-", "_").replace(".", "_") or "handler"

    @property
    def arguments(self) -> dict[str, Any]:
        return {**self.params, **self.inputs}

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Invocation:
        return cls(**data)

    def to_env(self) -> dict[str, str]:
        """Environment variables for a container (the code base64, the arguments as JSON)."""
        return {
            _ENV["uid"]: self.uid,
            _ENV["attempt"]: str(self.attempt),
            _ENV["project"]: self.project,
            _ENV["function"]: self.function,
            _ENV["handler"]: self.handler,
            _ENV["code"]: base64.b64encode(self.code.encode()).decode(),
            _ENV["filename"]: self.filename,
            _ENV["takes_context"]: "1" if self.takes_context else "0",
            _ENV["params"]: json.dumps(self.params),
            _ENV["inputs"]: json.dumps(self.inputs),
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Invocation:
        def get(key: str, default: str = "") -> str:
            return environ.get(_ENV[key], default)

        return cls(
            uid=get("uid"),
            attempt=int(get("attempt", "1")),
            project=get("project"),
            function=get("function"),
            handler=get("handler"),
            code=base64.b64decode(get("code")).decode("utf-8"),
            filename=get("filename", "handler.py"),
            takes_context=get("takes_context", "1") == "1",
            params=json.loads(get("params", "{}")),
            inputs=json.loads(get("inputs", "{}")),
        )

"""One call of a handler, and its two encodings: JSON (a local run's spec) and the container's
variables (a pod's environment). The names of every variable runplane sets in a run are here,
defined by the program that reads them."""

from __future__ import annotations

import base64
import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Changes when what the service writes (the invocation) or reads (the report) changes; an
#: installed runplane of another protocol is not used in its place.
PROTOCOL = 5
#: The container's variables that carry the invocation (``runplane.names`` has the same).
#: The parameter of a ``Class::method`` handler (MLRun's form) that holds the class's own
#: arguments: the instance is made with them, the method called with the others.
INIT_ARGS = "_init_args"

ENV_RUN_UID = "RUNPLANE_RUN_UID"
ENV_ATTEMPT = "RUNPLANE_ATTEMPT"
ENV_PROJECT = "RUNPLANE_PROJECT"
ENV_FUNCTION = "RUNPLANE_FUNCTION"
ENV_HANDLER = "RUNPLANE_HANDLER"
ENV_CODE = "RUNPLANE_EXEC_CODE"
ENV_FILENAME = "RUNPLANE_FILENAME"
ENV_TAKES_CONTEXT = "RUNPLANE_TAKES_CONTEXT"
ENV_PARAMS = "RUNPLANE_PARAMS"
ENV_INPUTS = "RUNPLANE_INPUTS"
ENV_MOUNTS = "RUNPLANE_MOUNTS"
ENV_RUN_DIR = "RUNPLANE_RUN_DIR"
ENV_ARTIFACT_PATH = "RUNPLANE_ARTIFACT_PATH"
ENV_CONTEXT_ONLY = "RUNPLANE_CONTEXT_ONLY"
ENV_RETURNS = "RUNPLANE_RETURNS"
ENV_HINTS = "RUNPLANE_INPUT_HINTS"
ENV_LABELS = "RUNPLANE_LABELS"
#: A secret the run may read with ``context.get_secret(KEY)`` arrives as this prefix + KEY.
ENV_SECRET_PREFIX = "RUNPLANE_SECRET_"
#: The project's parameters (JSON), for ``context.get_project_param``.
ENV_PROJECT_PARAMS = "RUNPLANE_PROJECT_PARAMS"
ENV_CHECKPOINT_PATH = "RUNPLANE_CHECKPOINT_PATH"
ENV_TERMINATION_LOG = "RUNPLANE_TERMINATION_LOG"
#: A serving function's server: concurrent handler calls per replica, how long a request may
#: wait for a free one (seconds), and the port to listen on.
ENV_HTTP_WORKERS = "RUNPLANE_HTTP_WORKERS"
ENV_HTTP_WORKER_TIMEOUT = "RUNPLANE_HTTP_WORKER_TIMEOUT"
ENV_HTTP_PORT = "RUNPLANE_HTTP_PORT"
#: A multi-process run's rank and world size (an mpijob's ranks; mpirun's own variables are
#: read first).
ENV_RANK = "RUNPLANE_RANK"
ENV_WORLD_SIZE = "RUNPLANE_WORLD_SIZE"

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
    "artifact_path",
    "context_only",
    "returns",
    "hints",
    "checkpoint_path",
    "labels",
)
_ENV = {
    "uid": ENV_RUN_UID,
    "attempt": ENV_ATTEMPT,
    "project": ENV_PROJECT,
    "function": ENV_FUNCTION,
    "handler": ENV_HANDLER,
    "code": ENV_CODE,
    "filename": ENV_FILENAME,
    "takes_context": ENV_TAKES_CONTEXT,
    "params": ENV_PARAMS,
    "inputs": ENV_INPUTS,
    "artifact_path": ENV_ARTIFACT_PATH,
    "context_only": ENV_CONTEXT_ONLY,
    "returns": ENV_RETURNS,
    "hints": ENV_HINTS,
    "checkpoint_path": ENV_CHECKPOINT_PATH,
    "labels": ENV_LABELS,
}


#: The variables that carry an invocation, for launchers that must pass them on (mpirun -x).
INVOCATION_ENV = tuple(_ENV.values())


class Invocation:
    """One call of a handler: the code it lives in, and its arguments, already converted to
    the handler's annotated types by the service. A plain class, not a dataclass: it is loaded
    in every run's process, where ``dataclasses`` and ``typing`` would cost more than it."""

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
        artifact_path: str = "",
        context_only: list[str] | None = None,
        returns: list[str] | None = None,
        hints: dict[str, str] | None = None,
        checkpoint_path: str = "",
        labels: dict[str, str] | None = None,
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
        #: Where artifacts go in the run's file system; the run's own directory when empty.
        self.artifact_path = artifact_path
        #: Parameters and inputs the handler does not take: only its context has them.
        self.context_only: list[str] = list(context_only or [])
        #: How to log what the handler returns: ``key`` or ``key:kind`` per returned value.
        self.returns: list[str] = list(returns or [])
        #: The type an input is read as, by name (``"pandas.DataFrame"``), as the caller
        #: wrote it in the input's key (``inputs={"df: pandas.DataFrame": path}``).
        self.hints: dict[str, str] = dict(hints or {})
        #: Where checkpoints go, kept across attempts; the run's own directory (here) when empty.
        self.checkpoint_path = checkpoint_path
        #: The run's labels (its function's and the call's), and ``kind``: where it runs
        #: (``local`` here, the function's kind in a pod), as MLRun's context has them.
        self.labels: dict[str, str] = dict(labels or {})

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
        """What the handler is called with: the parameters and inputs it takes."""
        given = {**self.params, **self.inputs}
        return {key: value for key, value in given.items() if key not in self.context_only}

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Invocation:
        return cls(**data)

    def to_env(self) -> dict[str, str]:
        """Environment variables for a container (the code base64, the arguments as JSON)."""
        return {
            ENV_RUN_UID: self.uid,
            ENV_ATTEMPT: str(self.attempt),
            ENV_PROJECT: self.project,
            ENV_FUNCTION: self.function,
            ENV_HANDLER: self.handler,
            ENV_CODE: base64.b64encode(self.code.encode()).decode(),
            ENV_FILENAME: self.filename,
            ENV_TAKES_CONTEXT: "1" if self.takes_context else "0",
            ENV_PARAMS: json.dumps(self.params),
            ENV_INPUTS: json.dumps(self.inputs),
            ENV_ARTIFACT_PATH: self.artifact_path,
            ENV_CONTEXT_ONLY: json.dumps(self.context_only),
            ENV_RETURNS: json.dumps(self.returns),
            ENV_HINTS: json.dumps(self.hints),
            ENV_CHECKPOINT_PATH: self.checkpoint_path,
            ENV_LABELS: json.dumps(self.labels),
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
            artifact_path=get("artifact_path"),
            context_only=json.loads(get("context_only", "[]")),
            returns=json.loads(get("returns", "[]")),
            hints=json.loads(get("hints", "{}")),
            checkpoint_path=get("checkpoint_path"),
            labels=json.loads(get("labels", "{}")),
        )

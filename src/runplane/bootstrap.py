"""The program inside every run: load the handler's code, call it with its context, report.

The same file runs a handler everywhere. A local run's process imports it; on Kubernetes it is
shipped to the pod as a ConfigMap and run as a script by the image's own ``python3``, so a pod
needs nothing of runplane in its image: this module uses only the standard library, imports
nothing of runplane, and keeps to the Python 3.9 language. When the image does have runplane
(of the same protocol), the installed copy runs instead, with whatever it adds.

What the pod reports travels through its termination message (Kubernetes keeps 4096 bytes of
it): the results and artifacts when they fit, otherwise only that they are on the last line of
the run's output, which the service reads back.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import traceback
import types
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Changes when what the service writes (the invocation) or reads (the report) changes; an
#: installed runplane of another protocol is not used in its place.
PROTOCOL = 4
#: The container's variables that carry the invocation (``runplane.names`` has the same).
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
#: Kubernetes keeps at most this much of a container's termination message.
MESSAGE_LIMIT = 4096
#: Results larger than the termination message go on the output's last line, after this.
RESULTS_MARKER = "runplane-results: "
#: The most a run's results may weigh, as JSON: more belongs in artifacts.
RESULTS_LIMIT = 1 << 20

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
        )


class DataItem(str):
    """A run's input: its path (it is the path, as a string), with the reading helpers that
    handlers written for MLRun call (``local()``, ``get()``, ``as_df()``).

    Only local files (and volumes mounted into the run, V3IO's included) are read: other
    stores (``s3://``, ``store://``...) are refused with the store's name.
    """

    def __new__(cls, url: str, key: str = "") -> DataItem:
        item = super().__new__(cls, url)
        item.key = key or os.path.basename(url.rstrip("/"))
        return item

    key: str

    @property
    def url(self) -> str:
        return str(self)

    @property
    def kind(self) -> str:
        return "file"

    @property
    def suffix(self) -> str:
        return os.path.splitext(self.local())[1]

    def local(self) -> str:
        """The file's path on this machine."""
        url = str(self)
        scheme = url.split("://", 1)[0].lower() if "://" in url else ""
        if scheme == "file":
            return url[len("file://") :]
        if scheme:
            raise OutOfScope(
                f"the {scheme}:// data store",
                f"runplane reads local files and mounted volumes (input {self.key!r} is {url!r}); "
                "copy the data to a mounted volume (mount_pvc, mount_v3io) and pass its path",
            )
        return url

    def get(self, size: int | None = None, offset: int = 0, encoding: str | None = None) -> Any:
        with open(self.local(), "rb") as source:
            source.seek(offset)
            data = source.read() if size is None else source.read(size)
        return data.decode(encoding) if encoding else data

    def put(self, data: str | bytes, append: bool = False) -> None:
        mode = ("a" if append else "w") + ("b" if isinstance(data, bytes) else "")
        with open(self.local(), mode) as target:
            target.write(data)

    def open(self, mode: str = "r") -> Any:
        return open(self.local(), mode)

    def stat(self) -> os.stat_result:
        return os.stat(self.local())

    def listdir(self) -> list[str]:
        return sorted(os.listdir(self.local()))

    ls = listdir

    def download(self, target_path: str) -> None:
        shutil.copyfile(self.local(), target_path)

    def upload(self, src_path: str) -> None:
        shutil.copyfile(src_path, self.local())

    def delete(self) -> None:
        os.remove(self.local())

    def as_df(self, columns: list[str] | None = None, format: str = "", **kwargs: Any) -> Any:
        """The file as a pandas DataFrame (CSV, Parquet, JSON, by suffix or ``format``)."""
        import pandas

        path = self.local()
        kind = (format or os.path.splitext(path)[1].lstrip(".")).lower()
        if kind in ("parquet", "pq"):
            frame = pandas.read_parquet(path, columns=columns, **kwargs)
        elif kind in ("json", "jsonl"):
            frame = pandas.read_json(path, lines=kind == "jsonl", **kwargs)
        else:
            frame = pandas.read_csv(path, usecols=columns, **kwargs)
        return frame


class OutOfScope(Exception):
    """An MLRun feature runplane does not provide; the message names it and what to do."""

    def __init__(self, feature: str, advice: str) -> None:
        self.feature = feature
        super().__init__(f"{feature} is not part of runplane: {advice}")


class ArtifactPath(str):
    """Where a logged artifact was written (it is the path), with the names MLRun's artifact
    objects have (``key``, ``target_path``, ``uri``)."""

    def __new__(cls, path: str, key: str, kind: str = "artifact") -> ArtifactPath:
        item = super().__new__(cls, path)
        item.key = key
        item.kind = kind
        return item

    key: str
    kind: str

    @property
    def target_path(self) -> str:
        return str(self)

    uri = target_path

    def get_target_path(self) -> str:
        return str(self)


class _Stdout(logging.StreamHandler):  # type: ignore[type-arg]  # not generic in 3.9
    """Writes to ``sys.stdout`` as it is when a line is logged (a notebook or a test may
    replace it after the logger was made)."""

    def __init__(self) -> None:
        super().__init__(sys.stdout)

    @property
    def stream(self) -> Any:
        return sys.stdout

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


_LEVELS = {"debug": 10, "info": 20, "warn": 30, "warning": 30, "error": 40, "critical": 50}


class RunLogger:
    """The handler's logger: ``logger.info("msg", key=value)`` writes the message and its
    fields (as JSON), ``logger.info("epoch %d", 3)`` formats as ``logging`` does, and
    ``logger.debug(message=...)`` works as in MLRun."""

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)
        if not self._logger.handlers:
            handler = _Stdout()
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            self._logger.addHandler(handler)
            self._logger.setLevel(logging.INFO)
            self._logger.propagate = False

    def _log(self, level: int, message: object, args: tuple[Any, ...], fields: Any) -> None:
        if not self._logger.isEnabledFor(level):
            return
        text = str(message) % args if args else str(message)
        if fields:
            text += " " + json.dumps(fields, default=str)
        self._logger.log(level, text)

    def debug(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.DEBUG, message, args, fields)

    def info(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.INFO, message, args, fields)

    def warning(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.WARNING, message, args, fields)

    warn = warning

    def error(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.ERROR, message, args, fields)

    def exception(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.ERROR, message, args, fields)
        self._logger.error("%s", traceback.format_exc().rstrip())

    def critical(self, message: object = "", *args: Any, **fields: Any) -> None:
        self._log(logging.CRITICAL, message, args, fields)

    def set_logger_level(self, level: str | int) -> None:
        """``"debug"``, ``"info"``, ... (any case) or a ``logging`` level number."""
        if isinstance(level, str):
            if level.lower() not in _LEVELS:
                raise ValueError(f"set_logger_level({level!r}): levels are " + ", ".join(_LEVELS))
            level = _LEVELS[level.lower()]
        self._logger.setLevel(level)

    setLevel = set_logger_level

    @property
    def level(self) -> int:
        return self._logger.level

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


def _json_value(key: str, value: Any) -> Any:
    """``value`` as JSON data: numpy scalars and arrays become numbers and lists."""
    for convert in ("tolist", "item"):  # numpy arrays, numpy scalars
        if not isinstance(value, (str, bytes)) and callable(getattr(value, convert, None)):
            value = getattr(value, convert)()
            break
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"log_result({key!r}, ...): {type(value).__name__} is not JSON-serialisable; "
            "log numbers, strings, lists or dicts, or use log_artifact for files"
        ) from None
    return value


def _check_key(call: str, key: object) -> str:
    if not isinstance(key, str) or not key or "/" in key or key in (".", ".."):
        raise ValueError(f"{call}({key!r}): a key is a file name, without '/'")
    return key


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(
            os.path.getsize(os.path.join(folder, name))
            for folder, _, files in os.walk(path)
            for name in files
        )
    return os.path.getsize(path)


class Context:
    """The ``context`` a handler receives: its parameters, a logger, where results go, and
    what a run that may be retried needs (its attempt, a checkpoint directory that outlives the
    attempt, the notice that the attempt is being stopped).

    Results and artifacts are appended, one JSON line each, to the run's event file as soon as
    they are logged, so what a handler logged before it was killed (OOM, abort) is kept. Its
    methods are those MLRun's context has, under the same names and arguments.
    """

    def __init__(
        self,
        invocation: Invocation,
        run_dir: Path,
        mounts: dict[str, str] | None = None,
        iteration: int = 0,
        parent: Context | None = None,
    ) -> None:
        """``mounts`` maps the function's mount paths to the directories behind them, for a
        run outside a container; in one (``None``) each volume is where the function says."""
        self.uid = invocation.uid
        self.project = invocation.project
        self.name = invocation.function
        self.handler = invocation.handler
        self.tag = ""
        self.iteration = iteration
        self.parameters = dict(invocation.params)
        self.inputs: dict[str, DataItem] = {
            key: DataItem(url, key) for key, url in invocation.inputs.items()
        }
        self.labels: dict[str, str] = {}
        self.annotations: dict[str, str] = {}
        self._mounts = mounts
        self._run_dir = run_dir
        self._parent = parent
        if invocation.artifact_path:
            self.artifact_path = self._resolve(invocation.artifact_path)
        else:
            self.artifact_path = str(run_dir / "artifacts")
        if parent is not None:
            self.artifact_path = os.path.join(parent.artifact_path, str(iteration))
        self._events = None if parent else (run_dir / "events.jsonl").open("a", encoding="utf-8")
        #: This process's place in a multi-process run (an mpijob's rank); 0 of 1 otherwise.
        self.rank, self.world_size = rank_and_size(os.environ)
        #: Which attempt of the run this is (1 for the first).
        self.attempt = invocation.attempt
        self._checkpoints = self._checkpoint_dir(invocation, run_dir)
        #: True once the attempt is being stopped (SIGTERM: a spot reclaim, a drain, a
        #: preemption, an abort): what is left of the grace period is for a last checkpoint.
        self.preempted = False
        self._on_preemption: list[Any] = []
        self.results: dict[str, Any] = {}
        self.artifacts: list[dict[str, Any]] = []
        #: Child contexts' parameters and results, one row per iteration, and the best one.
        self.iterations: list[dict[str, Any]] = []
        self.best_iteration = 0
        #: Why the handler failed, when it did.
        self.error = ""
        self.state = "running"
        self.logger = RunLogger(f"runplane.{self.name}")

    def __repr__(self) -> str:
        return f"<Context {self.name} run {self.uid} iteration {self.iteration}>"

    def __enter__(self) -> Context:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if error is not None:
            self.error = f"{type(error).__name__}: {error}"
        self.commit(completed=True)

    @property
    def out_path(self) -> str:
        return self.artifact_path

    @property
    def in_path(self) -> str:
        return ""

    @property
    def log_level(self) -> int:
        return self.logger.level

    def is_logging_worker(self) -> bool:
        """Whether this process records the run's results: rank 0 of a multi-process run."""
        return self.rank == 0

    def _checkpoint_dir(self, invocation: Invocation, run_dir: Path) -> Path | None:
        """``spec.checkpoint_path`` where it is here; without one, the run's own directory on
        this machine (kept across attempts), and none in a pod (whose directory goes with it)."""
        if invocation.checkpoint_path:
            return Path(self._resolve(invocation.checkpoint_path))
        if self._mounts is None:
            return None
        return run_dir / "checkpoints"

    @property
    def checkpoint_dir(self) -> str | None:
        """A directory for checkpoints that the run's next attempt finds (created on first
        use); ``None`` in a pod whose function sets no ``checkpoint_path`` on a volume."""
        if self._checkpoints is None:
            return None
        self._checkpoints.mkdir(parents=True, exist_ok=True)
        return str(self._checkpoints)

    @property
    def last_checkpoint(self) -> str | None:
        """The newest file or directory in :attr:`checkpoint_dir` (names starting with ``.``
        are unfinished and skipped), or ``None``: where an attempt resumes from."""
        if self._checkpoints is None or not self._checkpoints.is_dir():
            return None
        entries = [e for e in self._checkpoints.iterdir() if not e.name.startswith(".")]
        if not entries:
            return None
        return str(max(entries, key=lambda entry: (entry.stat().st_mtime_ns, entry.name)))

    def save_checkpoint(self, name: str, body: str | bytes) -> str:
        """Write a checkpoint file atomically (a reader never sees half of it); its path."""
        directory = self.checkpoint_dir
        if directory is None:
            raise RuntimeError(
                "no checkpoint directory: in a pod, set the function's checkpoint_path to a "
                "directory on a mounted volume (fn.with_checkpoints(path='/mnt/ckpt/{{run.uid}}'))"
            )
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"save_checkpoint({name!r}): a name is a file name, without '/'")
        target = Path(directory) / name
        partial = target.with_name(f".{name}.partial")
        partial.write_bytes(body.encode() if isinstance(body, str) else body)
        os.replace(partial, target)
        return str(target)

    def on_preemption(self, callback: Any) -> Any:
        """Call ``callback()`` when the attempt is being stopped (SIGTERM), before the handler
        is interrupted: the place for a last checkpoint. Usable as a decorator."""
        self._on_preemption.append(callback)
        return callback

    def _preempt(self) -> None:
        """SIGTERM: note it, tell the callbacks, then stop the handler."""
        self.preempted = True
        callbacks, self._on_preemption = self._on_preemption, []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one callback failing must not keep the others from running
                traceback.print_exc()
        raise Terminated

    def _emit(self, event: dict[str, Any]) -> None:
        if event.get("type") == "error":
            if self.world_size > 1:
                event = {**event, "message": f"rank {self.rank}: {event.get('message', '')}"}
            self.error = str(event.get("message", ""))
        elif not self.is_logging_worker():
            return  # results and artifacts are rank 0's to record
        if self._events is not None:
            self._events.write(json.dumps(event) + "\n")
            self._events.flush()

    # -- parameters, inputs, secrets --------------------------------------------------------

    def get_param(self, key: str, default: Any = None) -> Any:
        """A parameter of the run, else ``default`` (which is then recorded as its value)."""
        if key not in self.parameters:
            self.parameters[key] = default
        return self.parameters[key]

    def get_input(self, key: str, url: str = "") -> DataItem:
        """An input of the run by name, or ``url`` (a path) when the run has none by that name."""
        if key in self.inputs:
            return self.inputs[key]
        if not url:
            raise KeyError(f"the run has no input {key!r}; inputs: " + ", ".join(self.inputs))
        self.inputs[key] = DataItem(url, key)
        return self.inputs[key]

    def get_dataitem(self, url: str) -> DataItem:
        return DataItem(url)

    def get_secret(self, key: str) -> str | None:
        """A secret granted to the run (a project secret, or an environment variable that
        ``set_env_from_secret`` filled from a Secret); ``None`` when it has none."""
        granted = os.environ.get(ENV_SECRET_PREFIX + key)
        return granted if granted is not None else os.environ.get(key)

    def get_project_param(self, key: str, default: Any = None) -> Any:
        try:
            params = json.loads(os.environ.get(ENV_PROJECT_PARAMS) or "{}")
        except ValueError:
            params = {}
        return params.get(key, default) if isinstance(params, dict) else default

    def get_store_resource(self, url: str, secrets: object = None) -> Any:
        raise OutOfScope(
            "the artifact and feature store (store:// resources)",
            f"{url!r} cannot be read; pass data as inputs (files or mounted volumes)",
        )

    # -- results and labels -----------------------------------------------------------------

    def log_result(self, key: str, value: Any, commit: bool = False) -> None:
        """Record a result; JSON data (numbers, strings, lists, dicts; numpy values too)."""
        value = _json_value(key, value)
        self.results[key] = value
        self._emit({"type": "result", "key": key, "value": value})

    def log_results(self, results: dict[str, Any], commit: bool = False) -> None:
        if not isinstance(results, dict):
            raise TypeError("log_results takes a dict of results, e.g. {'accuracy': 0.9}")
        for key, value in results.items():
            self.log_result(key, value)

    def set_label(self, key: str, value: Any, replace: bool = True) -> None:
        if replace or key not in self.labels:
            self.labels[key] = str(value)
            self._emit({"type": "label", "key": key, "value": str(value)})

    def set_annotation(self, key: str, value: Any, replace: bool = True) -> None:
        if replace or key not in self.annotations:
            self.annotations[key] = str(value)

    def set_logger_level(self, level: str | int) -> None:
        self.logger.set_logger_level(level)

    def set_state(
        self, execution_state: str | None = None, error: str | None = None, commit: bool = True
    ) -> None:
        if error:
            self.error = str(error)
            self.state = "error"
        elif execution_state:
            self.state = execution_state

    def commit(self, message: str = "", completed: bool = False) -> None:
        """Everything logged is recorded as it is logged; a child reports to its parent."""
        if self._parent is not None and completed:
            self._parent._child_done(self)

    # -- artifacts ----------------------------------------------------------------------------

    def artifact_subpath(self, *subpaths: str) -> str:
        """A path under the run's artifact directory."""
        return os.path.join(self.artifact_path, *subpaths)

    def _artifact_target(
        self, key: str, suffix: str, artifact_path: str | None, target_path: str = ""
    ) -> str:
        if target_path and "://" not in target_path:
            return self._resolve(target_path)
        folder = self._resolve(artifact_path) if artifact_path else self.artifact_path
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, key + suffix)

    def _record_artifact(self, key: str, target: str, kind: str, **meta: Any) -> ArtifactPath:
        artifact = {"key": key, "path": target, "size": _size(target)}
        if self._parent is None:
            self.artifacts.append(artifact)
            self._emit({"type": "artifact", **artifact, "kind": kind, **meta})
        else:
            self._parent._record_artifact(f"{key}-{self.iteration}", target, kind, **meta)
        return ArtifactPath(target, key, kind)

    def log_artifact(
        self,
        item: Any,
        body: str | bytes | None = None,
        local_path: str | os.PathLike[str] | None = None,
        artifact_path: str | None = None,
        tag: str = "",
        viewer: str | None = None,
        target_path: str = "",
        src_path: str | None = None,
        upload: bool | None = None,
        labels: dict[str, str] | None = None,
        format: str | None = None,
        db_key: str | None = None,
        **kwargs: Any,
    ) -> ArtifactPath:
        """Keep a file with the run: written from ``body``, or copied from ``local_path`` (a
        file or a directory). With both, ``local_path`` names the file ``body`` is written to
        (its suffix is kept). Returns where it was written."""
        key = _check_key("log_artifact", getattr(item, "key", item))
        if not isinstance(item, str) and body is None:
            body = _artifact_body(item)
        source = src_path or (local_path if body is None else None)
        if body is None and source is None:
            raise ValueError(f"log_artifact({key!r}): give body or local_path")
        suffix = os.path.splitext(str(local_path or source or ""))[1]
        target = self._artifact_target(key, suffix, artifact_path, target_path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        if body is not None:
            data = body.encode() if isinstance(body, str) else body
            with open(target, "wb") as written:
                written.write(data or b"")
        elif os.path.isdir(str(source)):
            if os.path.exists(target):
                shutil.rmtree(target)
            shutil.copytree(str(source), target)
        else:
            shutil.copyfile(str(source), target)
        return self._record_artifact(key, target, "artifact", labels=labels or {})

    def log_dataset(
        self,
        key: str,
        df: Any,
        tag: str = "",
        local_path: str | None = None,
        artifact_path: str | None = None,
        upload: bool | None = None,
        labels: dict[str, str] | None = None,
        format: str = "",
        preview: int | None = None,
        stats: bool | None = None,
        db_key: str | None = None,
        target_path: str = "",
        extra_data: dict[str, Any] | None = None,
        label_column: str | None = None,
        **kwargs: Any,
    ) -> ArtifactPath:
        """Keep a table with the run, as a file: CSV by default, or ``format`` ``parquet`` or
        ``json``. ``df`` is a pandas DataFrame (or anything ``pandas.DataFrame`` takes)."""
        _check_key("log_dataset", key)
        import pandas

        frame = df if isinstance(df, pandas.DataFrame) else pandas.DataFrame(df)
        kind = (format or os.path.splitext(local_path or "")[1].lstrip(".") or "csv").lower()
        if kind not in ("csv", "parquet", "pq", "json"):
            raise ValueError(f"log_dataset({key!r}): formats are csv, parquet and json")
        target = self._artifact_target(key, "." + kind, artifact_path, target_path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        if kind == "csv":
            kwargs.setdefault("index", False)
            frame.to_csv(target, **kwargs)
        elif kind == "json":
            frame.to_json(target, **kwargs)
        else:
            frame.to_parquet(target, **kwargs)
        return self._record_artifact(
            key,
            target,
            "dataset",
            format=kind,
            columns=[str(column) for column in frame.columns],
            rows=len(frame),
            labels=labels or {},
            label_column=label_column,
        )

    def log_model(
        self,
        key: str,
        body: bytes | None = None,
        framework: str = "",
        tag: str = "",
        model_dir: str | None = None,
        model_file: str | None = None,
        algorithm: str | None = None,
        metrics: dict[str, Any] | None = None,
        parameters: dict[str, Any] | None = None,
        artifact_path: str | None = None,
        upload: bool = True,
        labels: dict[str, str] | None = None,
        inputs: Any = None,
        outputs: Any = None,
        feature_vector: str | None = None,
        feature_weights: list[Any] | None = None,
        training_set: Any = None,
        label_column: str | list[str] | None = None,
        extra_data: dict[str, Any] | None = None,
        db_key: str | None = None,
        **kwargs: Any,
    ) -> ArtifactPath:
        """Keep a model with the run: its file (``model_file``, or ``body`` written to it) in
        the folder ``<artifact path>/<key>/``, with ``model_spec.json`` holding its framework,
        algorithm, metrics, parameters and labels. Returns the model file's path."""
        _check_key("log_model", key)
        if feature_vector is not None:
            raise OutOfScope("the feature store (log_model feature_vector=)", "leave it out")
        if training_set is not None:
            raise OutOfScope(
                "model monitoring (log_model training_set=)",
                "leave it out; log the training set with log_dataset if you want it kept",
            )
        folder = self._artifact_target(key, "", artifact_path)
        os.makedirs(folder, exist_ok=True)
        if model_dir is not None and model_file is None and body is None:
            shutil.copytree(model_dir, folder, dirs_exist_ok=True)
            target = folder
        else:
            name = os.path.basename(model_file or f"{key}.pkl")
            target = os.path.join(folder, name)
            if body is not None:
                with open(target, "wb") as written:
                    written.write(body.encode() if isinstance(body, str) else body)
            elif model_file is not None:
                source = os.path.join(model_dir, model_file) if model_dir else model_file
                shutil.copyfile(source, target)
            else:
                raise ValueError(f"log_model({key!r}): give model_file, model_dir or body")
        spec = {
            "key": key,
            "framework": framework,
            "algorithm": algorithm,
            "model_file": os.path.basename(target),
            "metrics": metrics or {},
            "parameters": parameters or {},
            "labels": labels or {},
            "extra_data": {k: str(v) for k, v in (extra_data or {}).items()},
        }
        with open(os.path.join(folder, "model_spec.json"), "w", encoding="utf-8") as written:
            json.dump(spec, written, default=str, indent=2)
        return self._record_artifact(key, target, "model", framework=framework)

    def get_cached_artifact(self, key: str) -> dict[str, Any] | None:
        for artifact in self.artifacts:
            if artifact["key"] == key:
                return artifact
        return None

    # -- iterations --------------------------------------------------------------------------

    def get_child_context(self, with_parent_params: bool = False, **params: Any) -> Context:
        """A context for one iteration of this run (a hyperparameter trial, say); use it as
        a ``with`` block. Its results stay its own until ``mark_as_best()``."""
        invocation = Invocation(
            self.uid,
            self.project,
            self.name,
            self.handler,
            "",
            "",
            params={**(self.parameters if with_parent_params else {}), **params},
        )
        child = Context(
            invocation, self._run_dir, self._mounts, len(self.iterations) + 1, parent=self
        )
        self.iterations.append({"iter": child.iteration, "state": "running", **params})
        return child

    def _child_done(self, child: Context) -> None:
        row = self.iterations[child.iteration - 1]
        row["state"] = "error" if child.error else "completed"
        row.update({f"output.{key}": value for key, value in child.results.items()})

    def mark_as_best(self) -> None:
        """Make this iteration's results the parent's (the run's best)."""
        if self._parent is None:
            raise ValueError("mark_as_best() is for a child context (get_child_context)")
        self._parent.best_iteration = self.iteration
        self._parent.log_results({**self.results, "best_iteration": self.iteration})

    def log_iteration_results(
        self, best: int, summary: list[Any], task: object = None, commit: bool = False
    ) -> None:
        self.best_iteration = best
        if best:
            self.log_result("best_iteration", best)

    def _log_iteration_table(self) -> None:
        if not self.iterations:
            return
        import csv
        import io

        columns: list[str] = []
        for row in self.iterations:
            columns += [column for column in row if column not in columns]
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=columns)
        writer.writeheader()
        writer.writerows(self.iterations)
        self.log_artifact("iteration_results", body=text.getvalue(), local_path="results.csv")

    def to_dict(self) -> dict[str, Any]:
        return {
            "metadata": {
                "name": self.name,
                "uid": self.uid,
                "project": self.project,
                "iteration": self.iteration,
                "labels": dict(self.labels),
            },
            "spec": {
                "parameters": dict(self.parameters),
                "inputs": {key: str(item) for key, item in self.inputs.items()},
                "handler": self.handler,
            },
            "status": {
                "state": self.state,
                "results": dict(self.results),
                "artifacts": list(self.artifacts),
                "error": self.error or None,
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    # -- volumes ------------------------------------------------------------------------------

    def volume_path(self, mount_path: str) -> str:
        """The directory behind a volume mounted at ``mount_path`` in the function."""
        if self._mounts is None:
            return mount_path
        try:
            return self._mounts[mount_path.rstrip("/") or "/"]
        except KeyError:
            raise KeyError(
                f"no volume is mounted at {mount_path!r}; mounts: " + ", ".join(self._mounts)
            ) from None

    def _resolve(self, path: str) -> str:
        """A path in the function's file system, where it is here: under the volume mounted
        at its longest leading mount path, else as it is."""
        if self._mounts is None:
            return path
        for mount_path in sorted(self._mounts, key=len, reverse=True):
            if path == mount_path or path.startswith(mount_path.rstrip("/") + "/"):
                return self._mounts[mount_path] + path[len(mount_path.rstrip("/")) :]
        return path


def rank_and_size(environ: Mapping[str, str]) -> tuple[int, int]:
    """This process's rank and the world size: Open MPI's, MPICH's or runplane's variables."""
    for rank, size in (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
        (ENV_RANK, ENV_WORLD_SIZE),
    ):
        try:
            return int(environ[rank]), int(environ[size])
        except (KeyError, ValueError):
            continue
    return 0, 1


def _artifact_body(item: Any) -> bytes:
    """The content of an artifact object (an object with ``get_body()``, as MLRun's have)."""
    get_body = getattr(item, "get_body", None)
    if not callable(get_body):
        raise TypeError(
            f"log_artifact: {type(item).__name__} is not an artifact; give a key with body= "
            "or local_path="
        )
    body = get_body()
    return body.encode() if isinstance(body, str) else bytes(body)


#: The context of the run in this process, for ``get_or_create_ctx`` inside a run.
_current: Context | None = None


def current_context() -> Context | None:
    """The context of the handler running in this process, if one is."""
    return _current


def make_context(
    name: str, run_dir: Path, params: dict[str, Any] | None = None, project: str = "", uid: str = ""
) -> Context:
    """A context for code that runs outside a run (a script or notebook), kept in
    ``run_dir``; it becomes this process's context."""
    global _current
    import uuid

    run_dir.mkdir(parents=True, exist_ok=True)
    invocation = Invocation(
        uid or uuid.uuid4().hex, project or "default", name, "", "", "", params=params or {}
    )
    _current = Context(invocation, run_dir)
    return _current


class Terminated(BaseException):
    """SIGTERM arrived (an abort, a threshold, the node shutting down): raised in the handler
    so that its ``finally`` blocks and context managers run before the process ends."""


def load_module(invocation: Invocation) -> types.ModuleType:
    """The handler's module, loaded from the embedded code under its file's name; without a
    handler the code is a script, and its main block runs (reading ``get_or_create_ctx``)."""
    module = types.ModuleType(invocation.module_name)
    module.__file__ = invocation.filename
    sys.modules[invocation.module_name] = module
    if not invocation.handler:
        module.__name__ = "__main__"
        sys.argv = [invocation.filename]
    # dont_inherit: the handler's code is compiled as its own module, without this module's
    # `from __future__ import annotations` (its annotations stay objects).
    compiled = compile(invocation.code, invocation.filename, "exec", dont_inherit=True)
    exec(compiled, module.__dict__)
    return module


def _arguments(function: Any, context: Context, invocation: Invocation) -> dict[str, Any]:
    """The handler's arguments: parameters as converted, inputs as :class:`DataItem` (read
    into a DataFrame when the handler's annotation asks for one)."""
    arguments = invocation.arguments
    annotations = getattr(function, "__annotations__", {})
    for key in invocation.inputs:
        if key not in arguments:
            continue
        item = context.inputs[key]
        hint = invocation.hints.get(key) or annotations.get(key)
        hint_name = hint if isinstance(hint, str) else getattr(hint, "__name__", "")
        arguments[key] = item.as_df() if hint_name.endswith("DataFrame") else item
    return arguments


def log_returned(context: Context, returns: list[str], returned: Any) -> None:
    """Record what the handler returned: by ``returns`` (``key`` or ``key:kind``, one per
    returned value) when given; else a dict as one result per key and, as MLRun records it,
    the whole value as ``return``."""
    if returns:
        values = returned if isinstance(returned, tuple) and len(returns) > 1 else (returned,)
        for index in range(min(len(returns), len(values))):  # zip(strict=) is not 3.9
            key, _, kind = (part.strip() for part in returns[index].partition(":"))
            _log_value(context, key, kind, values[index])
        return
    if returned is None:
        return
    if isinstance(returned, dict) and all(isinstance(k, str) for k in returned):
        context.log_results(returned)
    try:
        context.log_result("return", returned)
    except TypeError:
        context.log_result("return", str(returned))


def _log_value(context: Context, key: str, kind: str, value: Any) -> None:
    kind = kind or _kind_of(value)
    if kind == "result":
        context.log_result(key, value)
    elif kind == "dataset":
        context.log_dataset(key, value)
    elif kind in ("file", "path"):
        context.log_artifact(key, local_path=str(value))
    elif kind in ("artifact", "text", "bytes"):
        context.log_artifact(key, body=value if isinstance(value, (str, bytes)) else str(value))
    elif kind == "object":
        import pickle

        context.log_artifact(key, body=pickle.dumps(value), local_path=f"{key}.pkl")
    else:
        raise ValueError(
            f"returns: {key}:{kind} - kinds are result, dataset, file, artifact and object"
        )


def _kind_of(value: Any) -> str:
    if type(value).__name__ == "DataFrame":
        return "dataset"
    if isinstance(value, bytes):
        return "artifact"
    try:
        json.dumps(_json_value("", value))
        return "result"
    except TypeError:
        return "object"


def call_handler(context: Context, invocation: Invocation) -> int:
    """Run the invocation's handler (or, without one, its code as a script); returns the
    process exit code."""
    global _current
    # SIGTERM (a spot reclaim, a drain, an abort): the preemption callbacks run, then the
    # handler is stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: context._preempt())
    _current = context
    try:
        module = load_module(invocation)
        if invocation.handler:
            function = getattr(module, invocation.handler)
            arguments = _arguments(function, context, invocation)
            if invocation.takes_context:
                returned = function(context, **arguments)
            else:
                returned = function(**arguments)
            log_returned(context, invocation.returns, returned)
        context._log_iteration_table()
    except Terminated:
        if context.world_size == 1:  # a rank is stopped by its launcher, which says why
            context._emit({"type": "error", "message": "stopped by SIGTERM"})
        return 128 + signal.SIGTERM
    except SystemExit as exit_request:
        code = exit_request.code
        if code in (None, 0):
            return 0
        context._emit({"type": "error", "message": f"the handler exited with {code!r}"})
        return code if isinstance(code, int) else 1
    except BaseException as error:  # everything else the handler raises is reported
        traceback.print_exc()
        context._emit({"type": "error", "message": f"{type(error).__name__}: {error}"})
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    if context.error and context.state == "error":  # the handler said it failed
        context._emit({"type": "error", "message": context.error})
        return 1
    return 0


def report(context: Context, exit_code: int, termination_log: Path) -> int:
    """Leave the run's results where the service reads them; returns the exit code to use.

    The termination message carries results and artifacts when they fit in it; otherwise it
    says they are on the output's last line, written here. Results too large for that too end
    the run as an error saying so.
    """
    summary: dict[str, Any] = {"results": context.results, "artifacts": context.artifacts}
    if context.error:
        summary["error"] = context.error
    text = json.dumps(summary)
    if len(text.encode()) > RESULTS_LIMIT:
        message = (
            f"the run's results are {len(text.encode())} bytes as JSON, more than "
            f"{RESULTS_LIMIT}; log large values with context.log_artifact"
        )
        summary, text, exit_code = {}, json.dumps({"error": message}), exit_code or 1
        sys.stderr.write(message + "\n")
    if len(text.encode()) > MESSAGE_LIMIT or context.world_size > 1:
        # A rank's termination message is its worker's, not the launcher's: rank 0's results
        # reach the run through the output, which mpirun forwards to the launcher.
        if not context.is_logging_worker():
            return exit_code
        sys.stdout.write("\n" + RESULTS_MARKER + text + "\n")
        sys.stdout.flush()
        text = json.dumps({"results_in_log": True})
    with contextlib.suppress(OSError):  # not in a container: the event file has it all
        termination_log.write_text(text, encoding="utf-8")
    return exit_code


# -- serving: handler(context, event), as Nuclio and MLRun call it --------------------------


class Event:
    """One HTTP request as a serving handler sees it (Nuclio's names). A JSON body arrives
    parsed (a dict or list); any other body as bytes."""

    def __init__(
        self,
        body: Any = b"",
        path: str = "/",
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> None:
        self.headers = dict(headers or {})
        self.content_type = _header(self.headers, "content-type")
        self.body = body
        if isinstance(body, bytes) and body and self.content_type.startswith("application/json"):
            with contextlib.suppress(ValueError):  # not JSON after all: the bytes, as they came
                self.body = json.loads(body)
        self.path = path
        self.method = method
        self.fields = dict(fields or {})
        self.trigger = types.SimpleNamespace(kind="http")

    def __repr__(self) -> str:
        return f"Event({self.method} {self.path})"


class Response:
    """What a handler returns for full control of the answer: body, headers, type, status."""

    def __init__(
        self,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        content_type: str = "",
        status_code: int = 200,
    ) -> None:
        self.body = body
        self.headers = dict(headers or {})
        self.content_type = content_type
        self.status_code = status_code


class ServingContext:
    """The ``context`` of a serving handler: a logger, ``user_data`` that ``init_context``
    fills once per replica, and :class:`Response`."""

    Response = Response

    def __init__(self, function: str, worker_id: int = 0) -> None:
        self.name = function
        self.worker_id = worker_id
        self.user_data = types.SimpleNamespace()
        self.logger = logging.getLogger(f"runplane.serving.{function}")
        if not self.logger.handlers:
            handler = logging.StreamHandler(sys.stdout)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            self.logger.addHandler(handler)
            self.logger.setLevel(logging.INFO)
            self.logger.propagate = False


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def _encoded(body: Any, content_type: str) -> tuple[bytes, str]:
    if body is None:
        return b"", content_type or "text/plain; charset=utf-8"
    if isinstance(body, bytes):
        return body, content_type or "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), content_type or "text/plain; charset=utf-8"
    return json.dumps(body).encode(), content_type or "application/json"


def answer(returned: Any) -> tuple[int, dict[str, str], bytes]:
    """A handler's return value as (status, headers, body): a :class:`Response`, a
    ``(status, body)`` pair, bytes or text as they are, anything else as JSON."""
    status, headers, content_type, body = 200, {}, "", returned
    if isinstance(returned, Response):
        status, headers = returned.status_code, dict(returned.headers)
        content_type, body = returned.content_type, returned.body
    elif isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[0], int):
        status, body = returned
    data, content_type = _encoded(body, content_type)
    headers["Content-Type"] = content_type
    return status, headers, data


class Server:
    """A serving function's handler, loaded once, called per request by every worker.

    ``init_context(context)``, when the code defines it, runs once before the first request.
    """

    def __init__(self, invocation: Invocation, workers: int, worker_timeout: float) -> None:
        module = load_module(invocation)
        self.handler = getattr(module, invocation.handler)
        self.context = ServingContext(invocation.function)
        init = getattr(module, "init_context", None)
        if callable(init):
            init(self.context)
        self.workers = threading.BoundedSemaphore(workers)
        self.worker_timeout = worker_timeout

    def respond(self, event: Event) -> tuple[int, dict[str, str], bytes]:
        """The handler's answer to one request; its exception is that request's 500."""
        try:
            return answer(self.handler(self.context, event))
        except Exception as error:
            traceback.print_exc()
            sys.stdout.flush()
            body = json.dumps({"error": f"{type(error).__name__}: {error}"}).encode()
            return 500, {"Content-Type": "application/json"}, body

    def call(self, event: Event) -> tuple[int, dict[str, str], bytes]:
        """:meth:`respond` in one of the workers; a request waits at most ``worker_timeout``
        for a free one, then gets a 503."""
        if not self.workers.acquire(timeout=self.worker_timeout):
            return busy(self.worker_timeout)
        try:
            return self.respond(event)
        finally:
            self.workers.release()


def busy(worker_timeout: float) -> tuple[int, dict[str, str], bytes]:
    """The answer when no worker came free in time."""
    message = f"no free worker within {worker_timeout:g} s; try again later"
    return 503, {"Content-Type": "application/json"}, json.dumps({"error": message}).encode()


def serving_options(environ: Mapping[str, str]) -> tuple[int, float, int]:
    """Workers, worker timeout (seconds) and port, from the container's variables."""
    workers = max(int(environ.get(ENV_HTTP_WORKERS) or 1), 1)
    timeout = float(environ.get(ENV_HTTP_WORKER_TIMEOUT) or 3600)
    return workers, timeout, int(environ.get(ENV_HTTP_PORT) or 8080)


def serve(environ: Mapping[str, str]) -> int:
    """A serving pod: the handler behind the standard library's threading HTTP server, with
    at most ``workers`` calls at once; SIGTERM stops it after the calls under way."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qsl, urlsplit

    workers, timeout, port = serving_options(environ)
    server = Server(Invocation.from_env(environ), workers, timeout)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            url = urlsplit(self.path)
            event = Event(
                body=self.rfile.read(length) if length else b"",
                path=url.path,
                method=self.command,
                headers=dict(self.headers.items()),
                fields=dict(parse_qsl(url.query)),
            )
            status, headers, body = server.call(event)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the handler's own output

    httpd = ThreadingHTTPServer(("", port), Handler)
    httpd.daemon_threads = True
    signal.signal(
        signal.SIGTERM,
        lambda signum, frame: threading.Thread(target=httpd.shutdown, daemon=True).start(),
    )
    server.context.logger.info("serving on port %d with %d worker(s)", port, workers)
    httpd.serve_forever()
    httpd.server_close()
    return 0


def run_pod(environ: Mapping[str, str]) -> int:
    """A pod's run: the invocation from the environment, the report to the termination
    message (and, when large, to the output's last line)."""
    invocation = Invocation.from_env(environ)
    run_dir = Path(environ.get(ENV_RUN_DIR) or tempfile.mkdtemp(prefix="runplane-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    mounts = json.loads(environ[ENV_MOUNTS]) if ENV_MOUNTS in environ else None
    context = Context(invocation, run_dir, mounts)
    exit_code = call_handler(context, invocation)
    termination_log = Path(environ.get(ENV_TERMINATION_LOG, "/dev/termination-log"))
    return report(context, exit_code, termination_log)


def main() -> int:
    """Run this pod's invocation, with the image's own runplane when it has one that speaks
    this protocol."""
    try:
        import runplane.bootstrap as installed
    except ImportError:
        installed = None  # type: ignore[assignment]
    if (
        installed is not None
        and getattr(installed, "PROTOCOL", None) == PROTOCOL
        and os.path.realpath(installed.__file__) != os.path.realpath(__file__)
    ):
        return int(installed.main_of_pod(os.environ))
    return main_of_pod(os.environ)


def main_of_pod(environ: Mapping[str, str]) -> int:
    """A serving pod serves; any other pod runs its invocation once."""
    if ENV_HTTP_WORKERS in environ:
        return serve(environ)
    return run_pod(environ)


if __name__ == "__main__":
    sys.exit(main())

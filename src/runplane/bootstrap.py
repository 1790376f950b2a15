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
import traceback
import types
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Changes when what the service writes (the invocation) or reads (the report) changes; an
#: installed runplane of another protocol is not used in its place. 2: checkpoints.
PROTOCOL = 2
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
ENV_CHECKPOINT_PATH = "RUNPLANE_CHECKPOINT_PATH"
ENV_TERMINATION_LOG = "RUNPLANE_TERMINATION_LOG"
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
    "checkpoint_path": ENV_CHECKPOINT_PATH,
}


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
        return {**self.params, **self.inputs}

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
            checkpoint_path=get("checkpoint_path"),
        )


class Context:
    """The ``context`` a handler receives: its parameters, a logger, where results go, and
    what a run that may be retried needs (its attempt, a checkpoint directory that outlives the
    attempt, the notice that the attempt is being stopped).

    Results and artifacts are appended, one JSON line each, to the run's event file as soon as
    they are logged, so what a handler logged before it was killed (OOM, abort) is kept.
    """

    def __init__(
        self, invocation: Invocation, run_dir: Path, mounts: dict[str, str] | None = None
    ) -> None:
        """``mounts`` maps the function's mount paths to the directories behind them, for a
        run outside a container; in one (``None``) each volume is where the function says."""
        self.uid = invocation.uid
        self.project = invocation.project
        self.name = invocation.function
        self.parameters = dict(invocation.params)
        self.inputs = dict(invocation.inputs)
        self._mounts = mounts
        self.artifact_path = (
            self._resolve(invocation.artifact_path)
            if invocation.artifact_path
            else str(run_dir / "artifacts")
        )
        self._events = (run_dir / "events.jsonl").open("a", encoding="utf-8")
        #: Which attempt of the run this is (1 for the first).
        self.attempt = invocation.attempt
        self._checkpoints = self._checkpoint_dir(invocation, run_dir)
        #: True once the attempt is being stopped (SIGTERM: a spot reclaim, a drain, a
        #: preemption, an abort): what is left of the grace period is for a last checkpoint.
        self.preempted = False
        self._on_preemption: list[Any] = []
        self.results: dict[str, Any] = {}
        self.artifacts: list[dict[str, Any]] = []
        #: Why the handler failed, when it did.
        self.error = ""
        self.logger = logging.getLogger(f"runplane.{self.name}")
        if not self.logger.handlers:
            handler = logging.StreamHandler(sys.stdout)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            self.logger.addHandler(handler)
            self.logger.setLevel(logging.INFO)
            self.logger.propagate = False

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
            self.error = str(event.get("message", ""))
        self._events.write(json.dumps(event) + "\n")
        self._events.flush()

    def log_result(self, key: str, value: Any) -> None:
        """Record a result; it must be JSON-serialisable (numbers, strings, lists, dicts)."""
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"log_result({key!r}, ...): {type(value).__name__} is not JSON-serialisable; "
                "log numbers, strings, lists or dicts, or use log_artifact for files"
            ) from None
        self.results[key] = value
        self._emit({"type": "result", "key": key, "value": value})

    def log_results(self, results: dict[str, Any]) -> None:
        for key, value in results.items():
            self.log_result(key, value)

    def log_artifact(
        self,
        key: str,
        local_path: str | os.PathLike[str] | None = None,
        body: str | bytes | None = None,
    ) -> str:
        """Keep a file (copied from ``local_path``, or written from ``body``) with the run."""
        if (local_path is None) == (body is None):
            raise ValueError(f"log_artifact({key!r}): give exactly one of local_path and body")
        if not key or "/" in key or key in (".", ".."):
            raise ValueError(f"log_artifact({key!r}): a key is a file name, without '/'")
        target_dir = Path(self.artifact_path)
        target_dir.mkdir(parents=True, exist_ok=True)
        if local_path is not None:
            source = Path(local_path)
            target = target_dir / f"{key}{source.suffix}"
            shutil.copyfile(source, target)
        else:
            target = target_dir / key
            data = body.encode() if isinstance(body, str) else body
            target.write_bytes(data or b"")
        artifact = {"key": key, "path": str(target), "size": target.stat().st_size}
        self.artifacts.append(artifact)
        self._emit({"type": "artifact", **artifact})
        return str(target)

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


class Terminated(BaseException):
    """SIGTERM arrived (an abort, a threshold, the node shutting down): raised in the handler
    so that its ``finally`` blocks and context managers run before the process ends."""


def call_handler(context: Context, invocation: Invocation) -> int:
    """Run the invocation's handler; returns the process exit code."""
    signal.signal(signal.SIGTERM, lambda signum, frame: context._preempt())
    try:
        module = types.ModuleType(invocation.module_name)
        module.__file__ = invocation.filename
        sys.modules[invocation.module_name] = module
        exec(compile(invocation.code, invocation.filename, "exec"), module.__dict__)
        function = getattr(module, invocation.handler)
        arguments = invocation.arguments
        if invocation.takes_context:
            returned = function(context, **arguments)
        else:
            returned = function(**arguments)
        if isinstance(returned, dict) and all(isinstance(k, str) for k in returned):
            context.log_results(returned)
        elif returned is not None:
            context.log_result("return", returned)
    except Terminated:
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
    if len(text.encode()) > MESSAGE_LIMIT:
        sys.stdout.write("\n" + RESULTS_MARKER + text + "\n")
        sys.stdout.flush()
        text = json.dumps({"results_in_log": True})
    with contextlib.suppress(OSError):  # not in a container: the event file has it all
        termination_log.write_text(text, encoding="utf-8")
    return exit_code


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
        return int(installed.run_pod(os.environ))
    return run_pod(os.environ)


if __name__ == "__main__":
    sys.exit(main())

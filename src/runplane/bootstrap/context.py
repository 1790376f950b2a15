"""The ``context`` a handler receives, with the methods MLRun's context has: parameters,
inputs, secrets, results, labels, iterations, volumes, and what a retried run needs."""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path

from .artifacts import ArtifactLogging
from .data import DataItem, OutOfScope
from .invocation import ENV_PROJECT_PARAMS, ENV_RANK, ENV_SECRET_PREFIX, ENV_WORLD_SIZE, Invocation
from .logger import RunLogger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


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


class Context(ArtifactLogging):
    """The ``context`` a handler receives: its parameters, a logger, where results go, and
    what a run that may be retried needs (its attempt, a checkpoint directory that outlives the
    attempt, the notice that the attempt is being stopped).

    Results and artifacts are appended, one JSON line each, to the run's event file as soon as
    they are logged, so what a handler logged before it was killed (OOM, abort) is kept. Its
    methods are those MLRun's context has, under the same names and arguments; those that
    keep files are :class:`~.artifacts.ArtifactLogging`'s.
    """

    _parent: Context | None

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
        self.labels: dict[str, str] = dict(invocation.labels)
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
        """Everything logged is recorded as it is logged; a child reports to its parent.
        ``completed`` marks a context still running as completed, as MLRun does (the run's
        own state is still what its handler's end makes it)."""
        if completed and self.state == "running":
            self.state = "completed"
        if self._parent is not None and completed:
            self._parent._child_done(self)

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
            labels=self.labels,
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


class Terminated(BaseException):
    """SIGTERM arrived (an abort, a threshold, the node shutting down): raised in the handler
    so that its ``finally`` blocks and context managers run before the process ends."""

"""The handle a run returns: its state, results, artifacts and logs, read from where it runs.

It answers both runplane's names (``handle.uid``, ``wait()``, ``record``) and those of the run
object MLRun code reads (``run.uid()``, ``run.outputs``, ``run.output(key)``,
``run.artifact(key)``, ``run.status.state``, ``wait_for_completion()``, ``show()``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from runplane.bootstrap import DataItem
from runplane.errors import RunFailedError
from runplane.runs import RunRecord, RunState

if TYPE_CHECKING:
    from runplane.client import Backend


class RunId(str):
    """A run's uid. A string, and callable, since MLRun code reads it as ``run.uid()``."""

    def __call__(self) -> str:
        return str(self)


class LogText(str):
    """A run's output, shown as the text itself (not a quoted string) in a notebook."""

    def __repr__(self) -> str:
        return str(self)


class RunHandle:
    """A submitted run: its state, results and logs, and the means to wait for or abort it."""

    def __init__(self, service: Backend, uid: str) -> None:
        self.service = service
        self.uid = RunId(uid)

    def __repr__(self) -> str:
        return f"<RunHandle {self.uid} {self.state()}>"

    @property
    def record(self) -> RunRecord:
        return self.service.get(self.uid)

    def state(self) -> str:
        """The run's state: created, pending, running, aborting, completed, error, aborted
        (``running`` is what MLRun's thresholds call ``executing``)."""
        return self.record.state.value

    @property
    def status_text(self) -> str:
        return self.record.status_text

    @property
    def error(self) -> str:
        """Why the run failed; empty unless it ended in ``error`` or ``aborted``."""
        record = self.record
        failed = record.state in (RunState.ERROR, RunState.ABORTED)
        return record.status_text if failed else ""

    @property
    def results(self) -> dict[str, Any]:
        """The results the handler logged or returned."""
        return self.record.results

    @property
    def outputs(self) -> dict[str, Any]:
        """The results, and each artifact's path by its key."""
        record = self.record
        return {**{a["key"]: a["path"] for a in record.artifacts}, **record.results}

    def output(self, key: str) -> Any:
        """A result, or an artifact's path; ``None`` when the run has neither by that key."""
        return self.outputs.get(key)

    def artifact(self, key: str) -> DataItem | None:
        """An artifact by its key, as a data item (``.local()``, ``.get()``, ``.as_df()``);
        ``None`` when the run logged none by that key."""
        for artifact in reversed(self.record.artifacts):
            if artifact["key"] == key:
                return DataItem(artifact["path"], key)
        return None

    @property
    def metadata(self) -> SimpleNamespace:
        record = self.record
        labels = dict(record.function.get("metadata", {}).get("labels", {}))
        return SimpleNamespace(
            uid=record.uid, name=record.name, project=record.project, labels=labels, iteration=0
        )

    @property
    def spec(self) -> SimpleNamespace:
        record = self.record
        return SimpleNamespace(
            parameters=dict(record.params),
            inputs=dict(record.inputs),
            handler=record.function.get("spec", {}).get("handler", ""),
            function=f"{record.project}/{record.name}",
            state_thresholds=dict(record.thresholds),
        )

    @property
    def status(self) -> SimpleNamespace:
        record = self.record
        return SimpleNamespace(
            state=record.state.value,
            results=dict(record.results),
            artifacts=list(record.artifacts),
            error=self.error or None,
            status_text=record.status_text,
            start_time=record.started_at,
            last_update=record.updated_at,
        )

    def wait(self, timeout: float | None = None) -> RunRecord:
        """Block until the run finishes (or ``timeout`` seconds pass); returns the record."""
        return self.service.wait(self.uid, timeout)

    def wait_for_completion(
        self,
        sleep: float = 3,
        timeout: float = 0,
        raise_on_failure: bool = True,
        show_logs: bool | None = None,
        logs_interval: float | None = None,
    ) -> str:
        """Wait for the run to end (at most ``timeout`` seconds when given); returns its
        state, raising when it failed and ``raise_on_failure``."""
        record = self.service.wait(self.uid, timeout or None)
        if show_logs:
            sys.stdout.write(self.logs())
        if raise_on_failure and record.state in (RunState.ERROR, RunState.ABORTED):
            raise RunFailedError(f"run {self.uid} ended {record.state.value}: {record.status_text}")
        return record.state.value

    def refresh(self) -> RunHandle:
        return self

    def logs(self, watch: bool = False, offset: int = 0) -> LogText:
        """Everything the run has written so far (with ``watch``, once it has ended)."""
        from runplane.client import output

        if watch:
            self.service.wait(self.uid)
        return LogText("".join(output(self.service, self.uid, offset)))

    def abort(self) -> RunRecord:
        return self.service.abort(self.uid)

    def to_dict(self) -> dict[str, Any]:
        return run_dict(self.record, status={"error": self.error or None})

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def show(self) -> None:
        """Print the run's state, parameters, results and artifacts."""
        sys.stdout.write("".join(_summary(self.to_dict())))
        sys.stdout.flush()


def run_dict(
    record: RunRecord,
    metadata: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The run as MLRun's run objects print it (``metadata``, ``spec``, ``status``), with what
    the caller adds to its metadata and its status."""
    return {
        "metadata": {
            "uid": record.uid,
            "name": record.name,
            "project": record.project,
            **(metadata or {}),
        },
        "spec": {
            "parameters": dict(record.params),
            "inputs": dict(record.inputs),
            "handler": record.function.get("spec", {}).get("handler", ""),
        },
        "status": {
            "state": record.state.value,
            "results": dict(record.results),
            "artifacts": list(record.artifacts),
            **(status or {}),
            "start_time": record.started_at,
            "last_update": record.updated_at,
        },
    }


def _summary(run: dict[str, Any]) -> Iterator[str]:
    metadata, spec, status = run["metadata"], run["spec"], run["status"]
    yield f"run {metadata['uid']}  {metadata['project']}/{metadata['name']}  {status['state']}\n"
    if status["error"]:
        yield f"  error: {status['error']}\n"
    for title, values in (("parameters", spec["parameters"]), ("results", status["results"])):
        for key, value in values.items():
            yield f"  {title[:-1]:<9} {key} = {value!r}\n"
    for artifact in status["artifacts"]:
        yield f"  artifact  {artifact['key']}: {artifact['path']}\n"

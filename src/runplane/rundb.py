"""Runs, functions and projects as MLRun code reads them from its "run DB"
(``mlrun.get_run_db()``): here, from where runs go (the runplane service, or this machine).
"""

from __future__ import annotations

import sys
from typing import Any

from runplane import hooks
from runplane.client import Backend, backend, output
from runplane.client import functions as catalog
from runplane.client.handle import run_dict
from runplane.errors import InvalidValueError, NotFoundError
from runplane.runs import RunRecord, RunState
from runplane.settings_view import SettingsView, apply_environment
from runplane.spec.labels import check_label_key, check_label_value

__all__ = ["RunDB", "RunList", "get_run_db", "set_environment"]


class RunList(list[dict[str, Any]]):
    """Runs as dicts (``metadata``, ``spec``, ``status``), as MLRun lists them."""

    def to_df(self) -> Any:
        """One row per run: uid, name, project, state, start, parameters, results."""
        import pandas

        return pandas.DataFrame(
            [
                {
                    "uid": run["metadata"]["uid"],
                    "name": run["metadata"]["name"],
                    "project": run["metadata"]["project"],
                    "state": run["status"]["state"],
                    "start": run["status"]["start_time"],
                    "parameters": run["spec"]["parameters"],
                    "results": run["status"]["results"],
                }
                for run in self
            ]
        )


def _as_dict(record: RunRecord) -> dict[str, Any]:
    labels = dict(record.function.get("metadata", {}).get("labels", {}))
    return run_dict(record, {"labels": labels}, {"status_text": record.status_text})


def _state(name: str) -> str:
    """A state filter in runplane's words (MLRun's ``executing`` is ``running``)."""
    return RunState.named("state", "running" if name == "executing" else name).value


class RunDB:
    """Where runs go, read as MLRun's run DB."""

    def __init__(self, service: Backend) -> None:
        self.service = service

    def list_runs(
        self,
        name: str | None = None,
        uid: str | list[str] | None = None,
        project: str | None = None,
        labels: dict[str, str] | list[str] | str | None = None,
        state: str | None = None,
        states: list[str] | None = None,
        last: int = 0,
        **ignored: Any,
    ) -> RunList:
        """Runs, newest first, filtered by name, uid, project, labels and state."""
        wanted = [_state(s) for s in (states or ([state] if state else []))]
        label_filter = _labels(labels)
        try:  # a label no run can have matches none (the service would refuse it)
            for key, value in label_filter.items():
                check_label_key("labels", key)
                check_label_value("labels", value)
        except InvalidValueError:
            return RunList()
        records = self.service.list_runs(
            project=project,
            states=wanted,
            limit=last or 1000,
            name=name or None,
            labels=label_filter,
        )
        uids = {uid} if isinstance(uid, str) else set(uid or [])
        return RunList(_as_dict(record) for record in records if not uids or record.uid in uids)

    def read_run(self, uid: str, project: str = "", iter: int = 0) -> dict[str, Any]:
        return _as_dict(self.service.get(uid))

    def abort_run(self, uid: str, project: str = "", iter: int = 0, **ignored: Any) -> None:
        self.service.abort(uid)

    def get_log(self, uid: str, project: str = "", offset: int = 0) -> tuple[str, bytes]:
        """The run's state and its output from byte ``offset``."""
        text = "".join(output(self.service, uid, offset))
        return self.service.get(uid).state.value, text.encode()

    def watch_log(self, uid: str, project: str = "", watch: bool = True, offset: int = 0) -> str:
        """Print the run's output (all of it, once it ended, with ``watch``); its state."""
        if watch:
            self.service.wait(uid)
        sys.stdout.write("".join(output(self.service, uid, offset)))
        return self.service.get(uid).state.value

    def list_functions(
        self, name: str | None = None, project: str | None = None, **ignored: Any
    ) -> list[dict[str, Any]]:
        found = catalog.list_functions(project or "default")
        return [fn.to_dict() for fn in found if not name or fn.metadata.name == name]

    def get_function(
        self, name: str, project: str = "", tag: str = "", hash_key: str = ""
    ) -> dict[str, Any]:
        return catalog.get_function(project or "default", name, tag or hash_key or None).to_dict()

    def store_function(
        self, function: Any, name: str, project: str = "", tag: str = "", **ignored: Any
    ) -> str:
        from runplane.spec.function import Function

        fn = function if isinstance(function, Function) else Function.from_dict(function)
        fn.metadata.name = name
        if project:
            fn.metadata.project = project
        if tag:
            fn.metadata.tag = tag
        return catalog.save(fn)

    def list_projects(
        self,
        owner: str | None = None,
        format_: Any = "name_only",
        labels: dict[str, str] | list[str] | str | None = None,
        state: str | None = None,
        **ignored: Any,
    ) -> list[Any]:
        """Every project: recorded ones, and those known only from their runs, functions or
        schedules (the service's, or this machine's). Names (``format_="name_only"``, MLRun's
        default), or projects (``"full"``), filtered by owner and labels."""
        from runplane.client import projects as records

        found = records.list_records()
        label_filter = _labels(labels)
        found = [
            record
            for record in found
            if (not owner or record.get("owner") == owner)
            and label_filter.items() <= dict(record.get("labels") or {}).items()
        ]
        if str(getattr(format_, "value", format_)) in ("full", "minimal", "summary"):
            return [hooks.client().project(record) for record in found]
        return [str(record["name"]) for record in found]

    def get_project(self, name: str) -> Any:
        """The project's record as a project (``NotFoundError``, MLRun's
        ``MLRunNotFoundError``, when no project has the name)."""
        from runplane.client import projects as records

        record = records.get(name)
        if record is None:
            raise NotFoundError(f"project {name!r} does not exist")
        return hooks.client().project(record)

    def create_project(self, project: Any) -> Any:
        """Record ``project`` (a project, or its dict); an existing record is kept as it is."""
        return self._store_project(project, update=False)

    def store_project(self, name: str, project: Any) -> Any:
        """Record ``project``, bringing an existing record of the caller's up to date."""
        return self._store_project(project, update=True, name=name)

    def _store_project(self, project: Any, update: bool, name: str = "") -> Any:
        if not hasattr(project, "store_record"):
            project = hooks.client().project(dict(project))
        if name and name != project.name:
            raise InvalidValueError(
                "name", name, f"the project's own name, {project.name!r}", repr(project.name)
            )
        project.store_record(update=update)
        return project

    def delete_project(self, name: str, deletion_strategy: Any = "restricted") -> None:
        """Delete a project's record: ``restricted`` (refused while it has runs, functions or
        schedules) or ``cascading`` (its functions and schedules too; its runs' records
        stay)."""
        from runplane.client import projects as records

        records.delete(name, deletion_strategy)

    def del_run(self, uid: str, **ignored: Any) -> None:
        raise InvalidValueError(
            "del_run", uid, "runplane keeps every run's record; abort a live run instead"
        )


def _labels(labels: dict[str, str] | list[str] | str | None) -> dict[str, str]:
    if not labels:
        return {}
    if isinstance(labels, dict):
        return {str(k): str(v) for k, v in labels.items()}
    items = [labels] if isinstance(labels, str) else labels
    pairs = (item.split("=", 1) for item in items)
    return {pair[0]: pair[1] if len(pair) > 1 else "" for pair in pairs}


def get_run_db(url: str = "", secrets: Any = None, force_reconnect: bool = False) -> RunDB:
    """Where runs go: the service at ``url`` (or ``RUNPLANE_API``), else this machine."""
    if url:
        set_environment(api_path=url)
    return RunDB(backend())


def set_environment(
    api_path: str | None = None,
    artifact_path: str = "",
    access_key: str | None = None,
    username: str | None = None,
    env_file: str | None = None,
    mock_functions: Any = None,
) -> tuple[str, str]:
    """Point runs at a runplane service (``api_path``; ``access_key`` is its token) and set
    the default artifact path; returns ``(default project, artifact path)``."""
    from runplane.config import current

    if api_path and not api_path.startswith(("http://", "https://")):
        raise InvalidValueError(
            "api_path", api_path, "the runplane service's URL", "'http://127.0.0.1:8470'"
        )
    view = SettingsView(current)
    return apply_environment(view, api_path, artifact_path, access_key, env_file)

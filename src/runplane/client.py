"""The SDK's and CLI's thin client: the embedded default, or a service when ``RUNPLANE_API``
is set, behind one interface, and the handle ``fn.run()`` returns."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from runplane.errors import RunplaneError

if TYPE_CHECKING:
    from runplane.config import Settings
    from runplane.service.records import RunRecord
    from runplane.spec.function import Function


class Backend(Protocol):
    """Where runs go: the embedded service in this process, or a remote one."""

    def submit(
        self,
        fn: Function,
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        state_thresholds: Mapping[str, Any] | None = None,
        source_dir: str = "",
    ) -> str: ...

    def get(self, uid: str) -> RunRecord: ...

    def wait(self, uid: str, timeout: float | None = None) -> RunRecord: ...

    def abort(self, uid: str) -> RunRecord: ...

    def logs(self, uid: str, offset: int = 0) -> str: ...

    def list_runs(
        self, project: str | None = None, states: Sequence[str] = (), limit: int = 50
    ) -> list[RunRecord]: ...


def _needs_service(what: str) -> RunplaneError:
    from runplane.errors import InvalidValueError

    return InvalidValueError(
        "RUNPLANE_API",
        None,
        f"{what} needs the runplane service (`runplane serve`); set RUNPLANE_API and "
        "RUNPLANE_TOKEN",
        "RUNPLANE_API=http://127.0.0.1:8470",
    )


class ApiError(RunplaneError):
    """The service refused a request; the message is the service's."""

    def __init__(self, status: int, message: str) -> None:
        self.http_status = status
        super().__init__(message)


class ApiBackend:
    """A runplane service over HTTP, with the same behaviour as the embedded default."""

    def __init__(self, url: str, token: str) -> None:
        import httpx

        self._http = httpx.Client(
            base_url=url.rstrip("/") + "/api/v1",
            timeout=30,
            headers={"Authorization": f"Bearer {token}"},
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise ApiError(
                503, f"the runplane service at {self._http.base_url} cannot be reached: {error}"
            ) from None
        if answer.status_code == 204:
            return None
        if answer.status_code >= 400:
            try:
                message = answer.json()["message"]
            except (ValueError, KeyError, TypeError):
                message = answer.text or answer.reason_phrase
            raise ApiError(answer.status_code, message)
        return (
            answer.json()
            if answer.headers.get("content-type", "").startswith("application/json")
            else answer.text
        )

    def submit(
        self,
        fn: Function,
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        state_thresholds: Mapping[str, Any] | None = None,
        source_dir: str = "",
    ) -> str:
        body = {
            "function": fn.to_dict(),
            "params": dict(params or {}),
            "inputs": {k: str(v) for k, v in (inputs or {}).items()},
            "state_thresholds": dict(state_thresholds or {}),
        }
        return str(self._call("POST", "/runs", json=body)["uid"])

    def get(self, uid: str) -> RunRecord:
        return _record(self._call("GET", f"/runs/{uid}"))

    def wait(self, uid: str, timeout: float | None = None) -> RunRecord:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.get(uid)
            if record.finished or (deadline is not None and time.monotonic() >= deadline):
                return record
            time.sleep(0.2)

    def abort(self, uid: str) -> RunRecord:
        return _record(self._call("POST", f"/runs/{uid}/abort"))

    def schedule(
        self,
        fn: Function,
        cron: str,
        params: Mapping[str, Any] | None = None,
        state_thresholds: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = {
            "function": fn.to_dict(),
            "schedule": cron,
            "params": dict(params or {}),
            "state_thresholds": dict(state_thresholds or {}),
        }
        return dict(self._call("POST", "/schedules", json=body))

    def schedules(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/schedules"))

    def delete_schedule(self, schedule_id: str) -> None:
        self._call("DELETE", f"/schedules/{schedule_id}")

    def deploy(self, fn: Function) -> dict[str, Any]:
        return dict(self._call("POST", "/deployments", json={"function": fn.to_dict()}))

    def logs(self, uid: str, offset: int = 0) -> str:
        text = str(self._call("GET", f"/runs/{uid}/logs"))
        return text.encode()[offset:].decode("utf-8", errors="replace")

    def list_runs(
        self, project: str | None = None, states: Sequence[str] = (), limit: int = 50
    ) -> list[RunRecord]:
        params: dict[str, Any] = {"limit": limit, "state": list(states)}
        if project:
            params["project"] = project
        return [_record(item) for item in self._call("GET", "/runs", params=params)]


def _record(data: dict[str, Any]) -> RunRecord:
    from runplane.service.records import AttemptRecord, RunRecord, TransitionRecord

    data = dict(data)
    data["transitions"] = [TransitionRecord(**t) for t in data["transitions"]]
    data["attempts"] = [AttemptRecord(**a) for a in data["attempts"]]
    return RunRecord(**data)


def api_backend(what: str) -> ApiBackend:
    """The service for what only a service can do (schedules, deployments)."""
    service = backend()
    if not isinstance(service, ApiBackend):
        raise _needs_service(what)
    return service


def backend(settings: Settings | None = None) -> Backend:
    """The service runs go to: ``RUNPLANE_API`` when set, else this machine."""
    if settings is None:
        from runplane.config import current

        settings = current()
    if settings.api:
        token = settings.token.get_secret_value() if settings.token else ""
        return ApiBackend(settings.api, token)
    from runplane.service.embedded import embedded

    return embedded(settings)


class RunHandle:
    """A submitted run: its state, results and logs, and the means to wait for or abort it."""

    def __init__(self, service: Backend, uid: str) -> None:
        self._service = service
        self.uid = uid

    def __repr__(self) -> str:
        return f"<RunHandle {self.uid} {self.state()}>"

    @property
    def record(self) -> RunRecord:
        return self._service.get(self.uid)

    def state(self) -> str:
        return self.record.state

    @property
    def status_text(self) -> str:
        return self.record.status_text

    @property
    def outputs(self) -> dict[str, Any]:
        """The results the handler logged or returned."""
        return self.record.results

    results = outputs

    def wait(self, timeout: float | None = None) -> RunRecord:
        """Block until the run finishes (or ``timeout`` seconds pass); returns the record."""
        return self._service.wait(self.uid, timeout)

    def logs(self) -> str:
        return self._service.logs(self.uid)

    def abort(self) -> RunRecord:
        return self._service.abort(self.uid)


def run_function(
    fn: Function,
    params: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    state_thresholds: Mapping[str, Any] | None = None,
    watch: bool = True,
) -> RunHandle:
    """Run ``fn`` where runs go (see :func:`backend`); with ``watch`` wait, printing its output."""
    service = backend()
    main = sys.modules.get("__main__")
    source_dir = str(Path(getattr(main, "__file__", "") or ".").resolve().parent)
    uid = service.submit(fn, params, inputs, state_thresholds, source_dir=source_dir)
    handle = RunHandle(service, uid)
    if watch:
        _follow(handle)
    return handle


def follow(service: Backend, uid: str, interval: float = 0.1) -> Iterator[tuple[RunRecord, str]]:
    """Each tick, the run's record and the output written since the previous tick; the last
    pair is the finished run's."""
    position = 0
    while True:
        record = service.wait(uid, timeout=interval)
        chunk = service.logs(uid, position)
        position += len(chunk.encode())
        yield record, chunk
        if record.finished:
            return


def _follow(handle: RunHandle) -> None:
    """Print the run's output as it is written, until the run ends."""
    for _, chunk in follow(handle._service, handle.uid, interval=0.2):
        if chunk:
            sys.stdout.write(chunk)
            sys.stdout.flush()

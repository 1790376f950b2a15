"""A runplane service over HTTP, behaving as the embedded default does."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from runplane.errors import InvalidValueError, RunplaneError
from runplane.runs import ResizeRecord, RunRecord, Usage, check_limit, check_uid
from runplane.runtimes.contract import Answer, Call
from runplane.service.wire import (
    API,
    FUNCTION_STATUS,
    INVOKE_TIMEOUT,
    NEXT_CURSOR,
    NEXT_OFFSET,
)
from runplane.spec.function import Function
from runplane.spec.run_options import RunOptions


class ApiError(RunplaneError):
    """The service refused a request; the message is the service's."""

    def __init__(self, status: int, message: str) -> None:
        self.http_status = status
        super().__init__(message)


class ApiBackend:
    """The service at ``url``, as the holder of ``token``; ``timeout`` bounds each request
    (a shell completion's are short)."""

    def __init__(self, url: str, token: str, timeout: float = 30) -> None:
        self._http = httpx.Client(
            base_url=url.rstrip("/") + API,
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}"},
        )

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise ApiError(
                503, f"the runplane service at {self._http.base_url} cannot be reached: {error}"
            ) from None
        if answer.status_code >= 400:
            try:
                body = answer.json()
                message, kind = str(body["message"]), body.get("error")
            except (ValueError, KeyError, TypeError):
                message, kind = "", None
            # The API's own words, unless what answered is not the API: a page that is not
            # runplane's, or a path the service does not have (a wrong base URL).
            if message and not (kind == "HTTPError" and answer.status_code in (404, 405)):
                raise ApiError(answer.status_code, message)
            raise self._not_the_api(answer)
        return answer

    def _not_the_api(self, answer: httpx.Response) -> ApiError:
        return ApiError(
            502,
            f"{self._http.base_url} answered HTTP {answer.status_code} "
            f"({answer.reason_phrase}), not as runplane's API does; RUNPLANE_API is the "
            "service's base URL (example: RUNPLANE_API=http://127.0.0.1:8470)",
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        answer = self._send(method, path, **kwargs)
        if answer.status_code == 204:
            return None
        try:
            return answer.json()
        except ValueError:
            raise self._not_the_api(answer) from None

    def submit(
        self, fn: Function, options: RunOptions | None = None, source_dir: str = ""
    ) -> RunRecord:
        """``source_dir`` is this machine's: the service runs the code the function carries."""
        body = {"function": fn.to_dict(), **(options or RunOptions()).model_dump()}
        return RunRecord.from_json(self._call("POST", "/runs", json=body))

    def get(self, uid: str) -> RunRecord:
        return RunRecord.from_json(self._call("GET", f"/runs/{check_uid(uid)}"))

    def wait(self, uid: str, timeout: float | None = None) -> RunRecord:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            record = self.get(uid)
            if record.finished or (deadline is not None and time.monotonic() >= deadline):
                return record
            time.sleep(0.2)

    def abort(self, uid: str) -> RunRecord:
        return RunRecord.from_json(self._call("POST", f"/runs/{check_uid(uid)}/abort"))

    def resize(self, uid: str, mem: Any = None, cpu: Any = None) -> ResizeRecord:
        body = {key: value for key, value in (("mem", mem), ("cpu", cpu)) if value is not None}
        answer = self._call("POST", f"/runs/{check_uid(uid)}/resize", json=body)
        return ResizeRecord(**{k: v for k, v in answer.items() if k in ResizeRecord.__slots__})

    def logs(self, uid: str, offset: int = 0) -> tuple[bytes, int]:
        answer = self._send("GET", f"/runs/{check_uid(uid)}/logs", params={"offset": offset})
        return answer.content, int(answer.headers.get(NEXT_OFFSET, offset + len(answer.content)))

    def usage(self, uid: str) -> Usage:
        return Usage(**self._call("GET", f"/runs/{check_uid(uid)}/usage"))

    def list_runs(
        self,
        *,
        project: str | None = None,
        states: Sequence[str] = (),
        limit: int = 50,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[RunRecord]:
        return self.page(limit=limit, project=project, states=states, name=name, labels=labels)[0]

    def page(
        self,
        *,
        limit: int = 50,
        project: str | None = None,
        states: Sequence[str] = (),
        owner: str | None = None,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
        created_since: float | None = None,
        created_until: float | None = None,
        after: str | None = None,
        updated_since: float | None = None,
    ) -> tuple[list[RunRecord], str | None]:
        """A page of runs and the next page's cursor (the API's ``X-Runplane-Next-Cursor``)."""
        given = {
            "project": project,
            "owner": owner,
            "name": name,
            "created_since": created_since,
            "created_until": created_until,
            "cursor": after,
            "updated_since": updated_since,
        }
        params: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        params |= {"limit": check_limit("limit", limit), "state": list(states)}
        params["label"] = [f"{key}={value}" for key, value in (labels or {}).items()]
        answer = self._send("GET", "/runs", params=params)
        try:
            runs = [RunRecord.from_json(item) for item in answer.json()]
        except ValueError:
            raise self._not_the_api(answer) from None
        return runs, answer.headers.get(NEXT_CURSOR)

    def schedule(
        self, fn: Function, cron: str, options: RunOptions | None = None
    ) -> dict[str, Any]:
        """Store a cron schedule of ``fn``; each run it fires gets ``options``' parameters and
        thresholds (a schedule keeps no inputs)."""
        given = (options or RunOptions()).model_dump()
        body = {"function": fn.to_dict(), "schedule": cron, **given}
        return dict(self._call("POST", "/schedules", json=body))

    def schedules(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/schedules"))

    def delete_schedule(self, schedule_id: str) -> None:
        if not schedule_id.strip():
            raise InvalidValueError(
                "schedule id", schedule_id, "a schedule's id, as listings show it", "'9b1f...'"
            )
        self._call("DELETE", f"/schedules/{quote(schedule_id, safe='')}")

    def deploy(self, fn: Function) -> dict[str, Any]:
        return dict(self._call("POST", "/deployments", json={"function": fn.to_dict()}))

    def deployments(self, project: str | None = None) -> list[dict[str, Any]]:
        params = {"project": project} if project else {}
        return list(self._call("GET", "/deployments", params=params))

    def deployment(self, project: str, name: str) -> dict[str, Any]:
        return dict(self._call("GET", _deployment_path(project, name)))

    def delete_deployment(self, project: str, name: str) -> str:
        return str(self._call("DELETE", _deployment_path(project, name))["deleted"])

    def invoke(self, project: str, name: str, call: Call) -> Answer:
        """The deployed function's answer, as the service got it."""
        answer = self._send(
            call.method,
            f"{_deployment_path(project, name)}/invoke/{call.path.lstrip('/')}",
            content=call.body or None,
            headers={**call.headers, INVOKE_TIMEOUT: f"{call.timeout:g}"},
            timeout=call.timeout + 5,
        )
        status = answer.headers.get(FUNCTION_STATUS)
        if status is None or not status.isdigit():
            raise self._not_the_api(answer)
        return Answer(int(status), answer.headers.get("content-type", ""), answer.content)

    def store_function(self, fn: Function) -> dict[str, Any]:
        return dict(self._call("POST", "/functions", json=fn.to_dict()))

    def get_function(self, project: str, name: str, version: str | None = None) -> dict[str, Any]:
        params = {"version": version} if version else {}
        return dict(self._call("GET", f"/projects/{project}/functions/{name}", params=params))

    def list_functions(self, project: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"/projects/{project}/functions"))

    def label_node(self, name: str, labels: dict[str, str | None]) -> dict[str, str]:
        """Set (and with ``None`` remove) a node's labels (admins); its labels after."""
        answer = self._call(
            "PATCH", f"/cluster/nodes/{quote(name, safe='')}", json={"labels": labels}
        )
        return dict(answer["labels"])

    def nodes(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/cluster/nodes"))

    def projects(self) -> list[str]:
        return list(self._call("GET", "/projects"))

    def list_projects(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/projects", params={"format": "full"}))

    def get_project(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/projects/{quote(name, safe='')}"))

    def create_project(self, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """Get-or-create: the existing record when there is one."""
        return dict(self._call("POST", "/projects", json={"name": name, **values}))

    def update_project(self, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/projects/{quote(name, safe='')}", json=dict(values)))

    def delete_project(self, name: str, deletion_strategy: str = "restricted") -> None:
        params = {"deletion_strategy": deletion_strategy}
        self._call("DELETE", f"/projects/{quote(name, safe='')}", params=params)

    def project_quotas(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/projects/{quote(name, safe='')}/quotas"))

    def set_project_quota(
        self, name: str, flavor: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        path = f"/projects/{quote(name, safe='')}/quotas/{quote(flavor, safe='')}"
        return dict(self._call("PUT", path, json=dict(values)))

    def clear_project_quota(self, name: str, flavor: str | None = None) -> dict[str, Any]:
        path = f"/projects/{quote(name, safe='')}/quotas"
        if flavor is not None:
            path += f"/{quote(flavor, safe='')}"
        return dict(self._call("DELETE", path))

    def budget(self, project: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/projects/{quote(project, safe='')}/budget"))

    def set_budget(self, project: str, values: Mapping[str, Any]) -> dict[str, Any]:
        path = f"/projects/{quote(project, safe='')}/budget"
        return dict(self._call("PUT", path, json=dict(values)))

    def clear_budget(self, project: str) -> dict[str, Any]:
        return dict(self._call("DELETE", f"/projects/{quote(project, safe='')}/budget"))

    def estimate(self, fn: Function) -> dict[str, Any]:
        return dict(self._call("POST", "/estimates", json={"function": fn.to_dict()}))


def _deployment_path(project: str, name: str) -> str:
    return f"/deployments/{quote(project, safe='')}/{quote(name, safe='')}"

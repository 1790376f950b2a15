"""The SDK's and CLI's thin client: the embedded default, or a service when ``RUNPLANE_API``
is set, behind one interface, and the handle a run returns."""

from __future__ import annotations

import codecs
import functools
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Unpack

from runplane.client.calls import prepare
from runplane.client.handle import RunHandle
from runplane.client.retry import apply_retry
from runplane.config import Settings, current
from runplane.errors import InvalidValueError
from runplane.runs import ResizeRecord, RunRecord, RunState, Usage
from runplane.spec.function import Function, FunctionKind, require_kind
from runplane.spec.loaders import embed_command
from runplane.spec.run_options import RunArguments, RunOptions

if TYPE_CHECKING:
    from runplane.client.remote import ApiBackend
    from runplane.client.serving import ServingRequest
    from runplane.runtimes.contract import Answer, Call

__all__ = [
    "Backend",
    "RunHandle",
    "api_backend",
    "backend",
    "deploy",
    "follow",
    "local_backend",
    "output",
    "run",
]


class Backend(Protocol):
    """Where runs go: the embedded service in this process, or a remote one."""

    def submit(
        self, fn: Function, options: RunOptions | None = None, source_dir: str = ""
    ) -> RunRecord:
        """Start a run of ``fn``; ``source_dir`` is where its code came from on this machine
        (the run's working directory when it runs here)."""

    def get(self, uid: str) -> RunRecord: ...

    def wait(self, uid: str, timeout: float | None = None) -> RunRecord: ...

    def abort(self, uid: str) -> RunRecord: ...

    def resize(self, uid: str, mem: Any = None, cpu: Any = None) -> ResizeRecord:
        """Change a running job's limits in place (``mem``, ``cpu``: quantities)."""

    def logs(self, uid: str, offset: int = 0) -> tuple[bytes, int]: ...

    def usage(self, uid: str) -> Usage: ...

    def list_runs(
        self,
        *,
        project: str | None = None,
        states: Sequence[str] = (),
        limit: int = 50,
        name: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> list[RunRecord]:
        """The newest runs (the caller's own through a service, everyone's for an admin):
        the first page of :meth:`page`."""

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
        """A page of runs, newest first, from the cursor ``after`` (the last page's), and the
        cursor of the next page (``None`` after the last). ``name`` is matched whole,
        ``labels`` all; ``created_since`` is inclusive, ``created_until`` exclusive. With
        ``updated_since``: the runs changed since then (inclusive), the latest change first
        (a watch's)."""

    def deploy(self, fn: Function) -> dict[str, Any]:
        """Deploy a serving function: its replicas here, or its objects on the service's
        runtime; what was applied."""

    def deployments(self, project: str | None = None) -> list[dict[str, Any]]:
        """Serving deployments (through a service: the caller's own, everyone's for an
        admin), each as the runtime describes it (see ``Runtime.deployments``)."""

    def deployment(self, project: str, name: str) -> dict[str, Any]: ...

    def delete_deployment(self, project: str, name: str) -> str:
        """Stop a deployment and remove it; returns ``project/name``."""

    def invoke(self, project: str, name: str, call: Call) -> Answer:
        """Send ``call`` to a deployed function; its answer, whatever its status."""

    def label_node(self, name: str, labels: dict[str, str | None]) -> dict[str, str]:
        """Set (and with ``None`` remove) a node's labels; its labels after."""

    def nodes(self) -> list[dict[str, Any]]:
        """Each node as ``GET /cluster/nodes`` shows it: group, spot, capacity, requested,
        free, taints, ready and why not (the embedded default: this machine)."""

    def store_function(self, fn: Function) -> dict[str, Any]:
        """Store ``fn`` as a new version (the same content is one version)."""

    def get_function(
        self, project: str, name: str, version: str | None = None
    ) -> dict[str, Any]: ...

    def list_functions(self, project: str) -> list[dict[str, Any]]: ...

    def create_project(self, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """Get-or-create: the existing record when there is one."""

    def update_project(self, name: str, values: Mapping[str, Any]) -> dict[str, Any]: ...

    def get_project(self, name: str) -> dict[str, Any]: ...

    def list_projects(self) -> list[dict[str, Any]]: ...

    def delete_project(self, name: str, deletion_strategy: str = "restricted") -> None: ...

    def project_quotas(self, name: str) -> dict[str, Any]:
        """The project's quotas per flavor and resource, with what its runs hold now."""

    def set_project_quota(
        self, name: str, flavor: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Replace the project's quota on ``flavor`` (admins); its quotas after."""

    def clear_project_quota(self, name: str, flavor: str | None = None) -> dict[str, Any]:
        """Drop the project's quota on ``flavor`` (``None``: every flavor; admins)."""

    def budget(self, project: str) -> dict[str, Any]:
        """The project's spend budget and what it spent in the period now."""

    def set_budget(self, project: str, values: Mapping[str, Any]) -> dict[str, Any]: ...

    def clear_budget(self, project: str) -> dict[str, Any]: ...

    def estimate(self, fn: Function) -> dict[str, Any]:
        """What a run of ``fn`` would cost, before it is submitted, and its project's budget."""


def backend(settings: Settings | None = None) -> Backend:
    """The service runs go to: ``RUNPLANE_API`` when set, else this machine."""
    settings = settings or current()
    if settings.api:
        from runplane.client.remote import ApiBackend

        token = settings.token.get_secret_value().strip() if settings.token else ""
        if not token:
            raise InvalidValueError(
                "RUNPLANE_TOKEN",
                None,
                f"the service at {settings.api} needs your bearer token; set RUNPLANE_TOKEN "
                "(ask the service's admin for one)",
                "RUNPLANE_TOKEN=<your token>",
            )
        return ApiBackend(settings.api, token)
    from runplane.service.embedded import embedded

    return embedded(settings)


def api_backend(what: str) -> ApiBackend:
    """The service, for what only a service can do (schedules)."""
    from runplane.client.remote import ApiBackend

    service = backend()
    if not isinstance(service, ApiBackend):
        raise InvalidValueError(
            "RUNPLANE_API",
            None,
            f"{what} needs the runplane service (`runplane serve`); set RUNPLANE_API and "
            "RUNPLANE_TOKEN",
            "RUNPLANE_API=http://127.0.0.1:8470",
        )
    return service


def _scheduling_backend(given: RunArguments) -> ApiBackend:
    """The service that keeps a schedule; a local run, or no service, is refused in MLRun's
    words (it refuses a schedule wherever the run would execute here)."""
    where = (
        "local=True runs here and now"
        if given.local
        else "without RUNPLANE_API a run executes here and now"
    )
    unexpected = InvalidValueError(
        "schedule",
        given.schedule,
        f"Unexpected schedule={given.schedule!r} parameter for local function execution: a "
        f"schedule is kept by the runplane service (`runplane serve`), and {where}",
        "fn.run(schedule='0 * * * *') with RUNPLANE_API and RUNPLANE_TOKEN set",
    )
    if given.local:
        raise unexpected
    try:
        return api_backend("a schedule")
    except InvalidValueError:
        raise unexpected from None


def run(fn: Function, given: RunArguments) -> Any:
    """Run ``fn`` where runs go (see :func:`backend`; ``local=True``: this machine) and return
    its :class:`RunHandle`; with ``watch`` wait, printing its output. With ``schedule`` (cron)
    store a schedule instead. With hyperparameters, run one child per parameter set and
    return the parent run (see :mod:`runplane.client.hyper`). ``retry`` is MLRun's (see
    :mod:`runplane.client.retry`).

    A ``spec.command`` file of this machine is embedded first: the run may execute elsewhere.
    """
    call = prepare(fn, given)
    call.fn = embed_command(apply_retry(call.fn, given.retry))
    source_dir = call.source_dir or _script_dir()
    call.source_dir = source_dir
    if given.schedule is not None:
        return _scheduling_backend(given).schedule(call.fn, given.schedule, call.options)
    service = local_backend() if given.local else backend()
    if call.iterates:
        from runplane.client.hyper import run_iterations

        return run_iterations(service, call, given.watch)
    record = service.submit(call.fn, call.options, source_dir=source_dir)
    handle = RunHandle(service, record.uid)
    if given.watch:
        said = ""
        for current, text in follow(service, record.uid, interval=0.2):
            if text:
                sys.stdout.write(text)
                sys.stdout.flush()
            # A run that waits says why (the scheduler's words); every state change is told.
            news = f"{current.state}: {current.status_text}" if current.status_text else ""
            if news and news != said and current.state is not RunState.RUNNING:
                sys.stderr.write(f"run {current.uid[:12]} {news}\n")  # what watch shows
                sys.stderr.flush()
            said = news or said
    return handle


def _script_dir() -> str:
    """The directory of the script that made the call: the run imports its neighbours from
    there, as the script does."""
    script = getattr(sys.modules.get("__main__"), "__file__", "") or ""
    return _resolved_parent(script) if os.path.isabs(script) else str(Path(".").resolve())


@functools.cache
def _resolved_parent(path: str) -> str:
    """Resolved once per script. Resolving makes a system call for each part of the path, and
    each lets the service's threads take the interpreter for a turn: in a loop of
    ``fn.run(watch=False)`` that was a tenth of the caller's time."""
    return str(Path(path).resolve().parent)


def local_backend(settings: Settings | None = None) -> Backend:
    """This machine's embedded service, whatever ``RUNPLANE_API`` says (``local=True``)."""
    from runplane.service.embedded import embedded

    return embedded(settings or current())


def deploy(fn: Function) -> dict[str, Any] | bool:
    """Deploy a serving function where runs go (see :func:`backend`; on this machine: replicas
    behind one local port, see docs/runtimes.md). A job has nothing to deploy: MLRun's
    ``fn.deploy()`` of a job builds its image, which runplane does not do (the build recipe is
    kept with the function), so it answers ``True``, ready, as MLRun does."""
    if fn.kind is not FunctionKind.SERVING:
        return True
    return backend().deploy(fn)


def invoke(fn: Function, **request: Unpack[ServingRequest]) -> Any:
    """Call a deployed serving function; the answer parsed from JSON when it is JSON. Through
    a service, the service sends the request on to the deployment and returns its answer."""
    from runplane.client.serving import answer_of, request_of

    require_kind(
        fn,
        FunctionKind.SERVING,
        "only serving functions are invoked; jobs are run",
        "code_to_function('serve', filename='serve.py', kind='serving', handler='handler')",
    )
    call = request_of(request)
    return answer_of(backend().invoke(fn.metadata.project, fn.metadata.name, call))


def output(service: Backend, uid: str, offset: int = 0) -> Iterator[str]:
    """The run's output from byte ``offset`` as text, in chunks, to its current end."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        chunk, offset = service.logs(uid, offset)
        if not chunk:
            yield decoder.decode(b"", final=True)
            return
        yield decoder.decode(chunk)


def follow(service: Backend, uid: str, interval: float = 0.1) -> Iterator[tuple[RunRecord, str]]:
    """Each tick, the run's record and the output written since the previous tick; the last
    pair is the finished run's. A character split across two reads is decoded whole."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offset = 0
    while True:
        record = service.wait(uid, timeout=interval)
        text = []
        while True:
            chunk, offset = service.logs(uid, offset)
            if not chunk:
                break
            text.append(decoder.decode(chunk))
        if record.finished:
            text.append(decoder.decode(b"", final=True))
        yield record, "".join(text)
        if record.finished:
            return

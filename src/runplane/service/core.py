"""The run service: from a function to an honest run record, whatever runtime executes it.

It renders a function, checks everything that can be checked, records the run, hands it to a
runtime, and keeps the record honest from the runtime's events. Its monitor aborts runs that
stay too long in a state (state thresholds) and acts on aborts other processes request.
"""

from __future__ import annotations

import base64
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from runplane.config import Settings
from runplane.errors import InvalidValueError
from runplane.render import RunRef, effective_resources, render
from runplane.runtimes.base import RunRequest, Runtime
from runplane.runtimes.events import Listener, RunEvent
from runplane.service.records import RunRecord, RunStore
from runplane.service.thresholds import ThresholdClocks
from runplane.spec.function import Function, FunctionKind
from runplane.spec.handler import bind_parameters, read_signature
from runplane.spec.thresholds import check_thresholds, threshold_seconds

_ABORT_POLL = 0.2
#: Events written in one transaction at most.
_BATCH = 256
LIVE_STATES = ("created", "pending", "running", "aborting")


def process_alive(pid: int, started: float) -> bool:
    try:
        return bool(abs(psutil.Process(pid).create_time() - started) < 1e-3)
    except psutil.Error:
        return False


#: This process, as the owner of the runs it executes.
THIS_PROCESS = (psutil.Process().pid, psutil.Process().create_time())


def _code_of(fn: Function) -> tuple[str, str]:
    if fn.spec.build.source:
        code = base64.b64decode(fn.spec.build.source).decode("utf-8")
        return code, fn.spec.build.filename or f"{fn.metadata.name}.py"
    if fn.spec.command:
        path = Path(fn.spec.command)
        if not path.is_file():
            raise InvalidValueError(
                "spec.command",
                fn.spec.command,
                "the file must exist here",
                "new_function(command='train.py')",
            )
        return path.read_text(encoding="utf-8"), path.name
    raise InvalidValueError(
        "function",
        fn.metadata.name,
        "a function needs code to run",
        "code_to_function('training', filename='train.py', handler='train')",
    )


class RunService:
    """Runs functions on one runtime and keeps their records.

    ``executor`` identifies the process that owns the runs (pid and start time) when they die
    with it, as local runs do; runs on a cluster outlive the service and have none.
    """

    def __init__(
        self,
        settings: Settings,
        store: RunStore,
        runtime: Callable[[Listener], Runtime],
        runtime_name: str,
        executor: tuple[int, float] | None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.runtime_name = runtime_name
        self.executor = executor
        self._condition = threading.Condition()
        self._clocks = ThresholdClocks()
        self._finished: dict[str, threading.Event] = {}
        self._closed = False
        for record in store.list_runs(states=LIVE_STATES, limit=100_000):
            if record.runtime == runtime_name and executor is None:
                # Runs that outlive the service (on a cluster) are watched again after a
                # restart; their thresholds are re-armed before the first event arrives.
                self._clocks.track(record.uid, threshold_seconds(record.thresholds))
                self._finished[record.uid] = threading.Event()
        self._events: queue.SimpleQueue[RunEvent | None] = queue.SimpleQueue()
        self._recorder = threading.Thread(
            target=self._record, name="runplane-recorder", daemon=True
        )
        self._recorder.start()
        self.runtime = runtime(self._on_event)
        self._aborts = ThreadPoolExecutor(max_workers=8, thread_name_prefix="runplane-abort")
        self._monitor = threading.Thread(target=self._watch, name="runplane-monitor", daemon=True)
        self._monitor.start()

    # -- submitting -----------------------------------------------------------------------

    def submit(self, fn: Function, *args: Any, **kwargs: Any) -> str:
        """Check, record and queue a run; returns its uid (see :meth:`submit_record`)."""
        return self.submit_record(fn, *args, **kwargs).uid

    def submit_record(
        self,
        fn: Function,
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        state_thresholds: Mapping[str, Any] | None = None,
        source_dir: str = "",
        role: str | None = None,
        uid: str | None = None,
    ) -> RunRecord:
        """Check, record and queue a run; returns its record. Nothing is recorded on error.

        A caller that must not start a run twice (a schedule firing again after a crash)
        passes a deterministic ``uid``; a uid already recorded raises :class:`RunExistsError`.
        """
        run_inputs = {str(k): str(v) for k, v in (inputs or {}).items()}
        uid = uid or uuid.uuid4().hex
        request, fn_thresholds = self._request(fn, uid, params or {}, run_inputs, role, source_dir)
        run_thresholds = check_thresholds("run(state_thresholds=...)", state_thresholds or {})
        thresholds = {
            **self.settings.function_defaults.state_thresholds,
            **fn_thresholds,
            **run_thresholds,
        }
        prepared = self.runtime.prepare(request)
        requests, limits, _ = effective_resources(fn, self.settings)
        record = self.store.create(
            uid=uid,
            project=fn.metadata.project,
            name=fn.metadata.name,
            runtime=self.runtime_name,
            function=fn.to_dict(),
            params=request.params,
            inputs=run_inputs,
            thresholds=thresholds,
            priority_class=request.pod_spec["priorityClassName"],
            requests={k: str(v) for k, v in requests.items()},
            limits={k: str(v) for k, v in limits.items()},
            executor=self.executor,
        )
        with self._condition:
            self._clocks.track(uid, threshold_seconds(thresholds))
            self._finished[uid] = threading.Event()
        self.runtime.submit(prepared)
        return record

    def _request(
        self,
        fn: Function,
        uid: str,
        params: Mapping[str, Any],
        inputs: dict[str, str],
        role: str | None,
        source_dir: str,
    ) -> tuple[RunRequest, dict[str, Any]]:
        """Everything a runtime needs for one attempt, checked; no state is touched."""
        if fn.kind is FunctionKind.SERVING:
            raise InvalidValueError(
                "kind",
                fn.kind.value,
                "serving functions are deployed, not run; use a job",
                "code_to_function(..., kind='job')",
            )
        code, filename = _code_of(fn)
        if not fn.spec.handler:
            raise InvalidValueError(
                "handler",
                "",
                "a run needs the handler to call",
                "code_to_function(..., handler='train')",
            )
        signature = read_signature(code, fn.spec.handler, filename)
        bound = bind_parameters(signature, {**params, **inputs})
        bound = {k: v for k, v in bound.items() if k not in inputs}
        rendered = render(fn, self.settings, run=RunRef(uid), role=role)
        priority_class = rendered.pod_spec["priorityClassName"]
        request = RunRequest(
            uid=uid,
            project=fn.metadata.project,
            function=fn.metadata.name,
            pod_spec=rendered.pod_spec,
            code=code,
            filename=filename,
            handler=fn.spec.handler,
            takes_context=signature.takes_context,
            params=bound,
            inputs=inputs,
            priority=self.settings.priority_classes.values.get(priority_class, 0),
            submitted=time.time(),
            source_dir=source_dir,
            manifests=rendered.manifests,
        )
        return request, dict(fn.spec.state_thresholds)

    def resubmit(self, record: RunRecord) -> None:
        """Hand a recorded run to the runtime again (same uid and attempt, so a runtime with
        deterministic names makes no second copy): for runs recorded but never started."""
        fn = Function.from_dict(record.function)
        request, _ = self._request(fn, record.uid, record.params, dict(record.inputs), None, "")
        self.runtime.submit(self.runtime.prepare(request))

    # -- events and thresholds ------------------------------------------------------------

    def _on_event(self, event: RunEvent) -> None:
        """Runtimes call this from their own threads; the recorder thread writes."""
        self._events.put(event)

    def _record(self) -> None:
        """Write events in order, a burst per transaction, then start or stop their clocks."""
        while True:
            first = self._events.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _BATCH:
                try:
                    item = self._events.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._events.put(None)  # stop after this batch
                    break
                batch.append(item)
            try:
                applied = self.store.apply_many(batch)
            except Exception as error:  # keep recording; a broken batch is retried one by one
                print(f"runplane: recording events failed: {error}", flush=True)
                applied = [self._apply_alone(event) for event in batch]
            with self._condition:
                for event, ok in zip(batch, applied, strict=True):
                    if not ok:
                        continue
                    self._clocks.observe(event)
                    if event.state.terminal:
                        finished = self._finished.pop(event.uid, None)
                        if finished is not None:
                            finished.set()
                self._condition.notify()

    def _apply_alone(self, event: RunEvent) -> bool:
        try:
            return self.store.apply(event)
        except Exception as error:
            print(f"runplane: event of run {event.uid} not recorded: {error}", flush=True)
            return False

    def _watch(self) -> None:
        next_poll = time.monotonic()
        while not self._closed:
            with self._condition:
                breaches = self._clocks.due(time.time())
                if not breaches:
                    deadline = self._clocks.next_deadline()
                    timeout = _ABORT_POLL
                    if deadline is not None:
                        timeout = min(timeout, max(deadline - time.time(), 0.0))
                    self._condition.wait(timeout)
            # Aborts on a cluster are API calls; breaches due together are aborted together.
            for breach in breaches:
                self._aborts.submit(
                    self.runtime.abort, breach.uid, "ThresholdExceeded", breach.text
                )
            if self.executor is not None and time.monotonic() >= next_poll:
                next_poll = time.monotonic() + _ABORT_POLL
                for uid in self.store.abort_requests(self.executor[0]):
                    self.runtime.abort(uid, "Aborted", "aborted by request")

    # -- clients --------------------------------------------------------------------------

    def abort(self, uid: str) -> RunRecord:
        """Abort a pending or running run, whichever process owns it."""
        record = self.store.request_abort(uid)
        if self.runtime.abort(record.uid, "Aborted", "aborted by request"):
            return record
        owner_pid, owner_started = self.store.owner(record.uid)
        if owner_pid is not None and not process_alive(owner_pid, owner_started or 0.0):
            self.store.mark_lost(process_alive)
        return self.store.get(record.uid)

    def get(self, uid: str) -> RunRecord:
        return self.store.get(uid)

    def list_runs(
        self, project: str | None = None, states: Sequence[str] = (), limit: int = 50
    ) -> list[RunRecord]:
        return self.store.list_runs(project=project, states=states, limit=limit)

    def logs(self, uid: str, offset: int = 0) -> str:
        """The run's output from byte ``offset`` on (empty if it wrote nothing yet)."""
        record = self.store.get(uid)
        runtime_logs = getattr(self.runtime, "logs", None)
        if runtime_logs is not None:  # the run's output lives where it ran (a pod)
            text: str = runtime_logs(record.uid)
            return text.encode()[offset:].decode("utf-8", errors="replace")
        path = self.settings.local.home / "runs" / record.uid / "output.log"
        if not path.exists():
            return ""
        with path.open("rb") as stream:
            stream.seek(offset)
            return stream.read().decode("utf-8", errors="replace")

    def wait(self, uid: str, timeout: float | None = None) -> RunRecord:
        with self._condition:
            finished = self._finished.get(uid)
        if finished is not None:
            finished.wait(timeout)
            return self.store.get(uid)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:  # a run of another process: follow its record
            record = self.store.get(uid)
            if record.finished or (deadline is not None and time.monotonic() >= deadline):
                return record
            time.sleep(0.1)

    def close(self) -> None:
        self._closed = True
        with self._condition:
            self._condition.notify_all()
        self._monitor.join(timeout=10)
        self._aborts.shutdown(wait=True)
        self.runtime.close()
        self._events.put(None)  # record everything the runtime reported, then stop
        self._recorder.join(timeout=30)

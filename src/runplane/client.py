"""What ``fn.run()`` returns and how it gets there: the SDK's thin client over the service."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runplane.service.embedded import EmbeddedService
    from runplane.service.records import RunRecord
    from runplane.spec.function import Function


class RunHandle:
    """A submitted run: its state, results and logs, and the means to wait for or abort it."""

    def __init__(self, service: EmbeddedService, uid: str) -> None:
        self._service = service
        self.uid = uid

    def __repr__(self) -> str:
        return f"<RunHandle {self.uid} {self.state()}>"

    @property
    def record(self) -> RunRecord:
        return self._service.store.get(self.uid)

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
        path = self._service.settings.local.home / "runs" / self.uid / "output.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def abort(self) -> RunRecord:
        return self._service.abort(self.uid)


def run_function(
    fn: Function,
    params: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    state_thresholds: Mapping[str, Any] | None = None,
    watch: bool = True,
) -> RunHandle:
    """Run ``fn`` on the embedded default; with ``watch`` wait, printing its output."""
    from runplane.service.embedded import embedded

    service = embedded()
    main = sys.modules.get("__main__")
    source_dir = str(Path(getattr(main, "__file__", "") or ".").resolve().parent)
    uid = service.submit(fn, params, inputs, state_thresholds, source_dir=source_dir)
    handle = RunHandle(service, uid)
    if watch:
        _follow(handle)
    return handle


def _follow(handle: RunHandle) -> None:
    """Print the run's output as it is written, until the run ends."""
    path = handle._service.settings.local.home / "runs" / handle.uid / "output.log"
    position = 0
    while True:
        done = handle.wait(timeout=0.2).finished
        if path.exists():
            with path.open("rb") as stream:
                stream.seek(position)
                chunk = stream.read()
            position += len(chunk)
            if chunk:
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
        if done:
            return
        time.sleep(0.05)

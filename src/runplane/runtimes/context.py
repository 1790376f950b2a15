"""The ``context`` a handler receives: its parameters, a logger, and where its results go.

Results and artifacts are appended, one JSON line each, to the run's event file as soon as
they are logged, so what a handler logged before it was killed (OOM, abort) is kept.
Loaded inside the run's own process: standard library only.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path

TYPE_CHECKING = False  # typing costs a run's start more than it is worth at run time
if TYPE_CHECKING:
    from typing import Any

    from runplane.runtimes.invocation import Invocation


class Context:
    def __init__(self, invocation: Invocation, run_dir: Path, mounts: dict[str, str]) -> None:
        self.uid = invocation.uid
        self.project = invocation.project
        self.name = invocation.function
        self.parameters = dict(invocation.params)
        self.inputs = dict(invocation.inputs)
        self.artifact_path = str(run_dir / "artifacts")
        self._events = (run_dir / "events.jsonl").open("a", encoding="utf-8")
        self._mounts = mounts
        self.results: dict[str, Any] = {}
        self.logger = logging.getLogger(f"runplane.{self.name}")
        if not self.logger.handlers:
            handler = logging.StreamHandler(sys.stdout)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            self.logger.addHandler(handler)
            self.logger.setLevel(logging.INFO)
            self.logger.propagate = False

    def _emit(self, event: dict[str, Any]) -> None:
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
        self._emit(
            {"type": "artifact", "key": key, "path": str(target), "size": target.stat().st_size}
        )
        return str(target)

    def volume_path(self, mount_path: str) -> str:
        """The local directory behind a volume mounted at ``mount_path`` in the function."""
        try:
            return self._mounts[mount_path.rstrip("/") or "/"]
        except KeyError:
            raise KeyError(
                f"no volume is mounted at {mount_path!r}; mounts: " + ", ".join(self._mounts)
            ) from None

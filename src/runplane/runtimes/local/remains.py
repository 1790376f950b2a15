"""How a local run ended, read from what it left behind, for an end no one recorded.

A run's process writes an ``exit`` line (its exit code and attempt) to its ``events.jsonl`` as
the last thing it does (``child.py``), after the results, artifacts and errors its handler
logged there. A run's end can still miss its record: the service was killed between the
process's exit and the write, or the store could not take the write (a full disk) and the
service stopped before it could. The next start finds such a run live in the records with
its executor gone, and asks here before it declares it lost: a run that wrote its exit line
ended as the line and its results say; a run that did not died before its handler returned
(killed with its executor), and is lost.

The line is the run's own word, as its results are: a run can misstate only its own end.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runplane.runs import Reason, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.local.supervise import read_events

#: The file a run's process reports to; its lines are JSON objects with a ``type``.
EVENTS = "events.jsonl"

_READ_FROM_FILES = "read from the run's files: the service stopped before recording it"


def end_left(run_dir: Path, uid: str, attempt: int) -> RunEvent | None:
    """The end attempt ``attempt`` of run ``uid`` wrote in ``run_dir``; ``None`` when it
    wrote none (it never ended on its own, or it is another attempt's)."""
    try:  # never through a link: a run may replace its file with one to another's
        fd = os.open(run_dir / EVENTS, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        at = os.fstat(file.fileno()).st_mtime  # the exit line was its last write
        code = _exit_code(file.read(), attempt)
    if code is None:
        return None
    results, artifacts, error = read_events(run_dir)
    if code == 0:
        state, reason, message = RunState.COMPLETED, Reason.COMPLETED, _READ_FROM_FILES
    else:
        state, reason = RunState.ERROR, Reason.ERROR
        message = f"{error or f'the process exited with code {code}'} ({_READ_FROM_FILES})"
    return RunEvent(
        uid,
        state,
        reason=reason,
        message=message,
        attempt=attempt,
        exit_code=code,
        results=results,
        artifacts=artifacts,
        at=at,
    )


def _exit_code(text: bytes, attempt: int) -> int | None:
    """The code of the last ``exit`` line of ``attempt`` in ``text``."""
    for line in reversed(text.splitlines()):
        if b'"exit"' not in line:
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a line cut short by a kill
        if not isinstance(event, dict) or event.get("type") != "exit":
            continue
        code, written_by = event.get("code"), event.get("attempt")
        if isinstance(code, int) and not isinstance(code, bool) and written_by == attempt:
            return code & 0xFF  # as the process exits with it
        return None
    return None

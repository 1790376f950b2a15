"""An mpijob's launcher: ``mpirun`` run to its end, its output passed on as it comes, and the
run's report made from what the ranks printed.

Every rank of a multi-process run prints its report on a line of its own (rank 0 its results,
a failing rank its error: :mod:`.report`), and ``mpirun`` forwards all ranks' output in
whatever order they wrote it, adding its own notices after a failure. So those lines are held
back here, and one report ends the output once ``mpirun`` has: rank 0's results, and the error
of the first rank that failed, which names it. The termination message says the report is
there, on the output's last line, where the service reads reports too large for the message.

Started as ``python3 -c`` with the shipped package on ``sys.path`` (the launcher's pod mounts
the bootstrap as its workers' do); SIGTERM (an abort) is passed on to ``mpirun``, which stops
the ranks: the launcher is its container's first process, which ignores signals it does not
handle.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path

from .invocation import ENV_TERMINATION_LOG
from .report import RESULTS_MARKER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any


def launch(argv: Sequence[str], environ: Mapping[str, str], out: Any = None) -> int:
    """Run ``argv`` (``mpirun ...``), passing its output on to ``out`` (stdout); returns its
    exit code."""
    out = out or sys.stdout
    process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    signal.signal(signal.SIGTERM, lambda signum, frame: process.send_signal(signum))
    results: dict[str, Any] | None = None
    error = ""
    assert process.stdout is not None
    for raw in process.stdout:
        line = raw.decode("utf-8", errors="replace")
        report = _report(line)
        if report is None:
            out.write(line)
            out.flush()
            continue
        if report.get("error") and not error:
            error = str(report["error"])
        if report.get("rank", 0) == 0:
            results = report
    code = process.wait()
    summary: dict[str, Any] = {"results": {}, "artifacts": []}
    if results is not None:
        summary.update({k: v for k, v in results.items() if k != "rank"})
    if code != 0 and not summary.get("error"):
        summary["error"] = error or f"mpirun exited with code {code}"
    out.write("\n" + RESULTS_MARKER + json.dumps(summary) + "\n")
    out.flush()
    termination_log = Path(environ.get(ENV_TERMINATION_LOG, "/dev/termination-log"))
    with contextlib.suppress(OSError):  # not in a container: the output has it all
        termination_log.write_text(json.dumps({"results_in_log": True}), encoding="utf-8")
    return code


def _report(line: str) -> dict[str, Any] | None:
    """A rank's report line as a dict; ``None`` for any other line."""
    text = line.strip()
    if not text.startswith(RESULTS_MARKER):
        return None
    try:
        report = json.loads(text[len(RESULTS_MARKER) :])
    except (ValueError, RecursionError):
        return None
    return report if isinstance(report, dict) else None

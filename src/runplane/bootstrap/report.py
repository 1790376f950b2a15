"""What a pod's run leaves for the service: its results and artifacts, in the container's
termination message when they fit, else on the output's last line."""

from __future__ import annotations

import contextlib
import json
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from .context import Context

#: Kubernetes keeps at most this much of a container's termination message.
MESSAGE_LIMIT = 4096
#: Results larger than the termination message go on the output's last line, after this.
RESULTS_MARKER = "runplane-results: "
#: The most a run's results may weigh, as JSON: more belongs in artifacts.
RESULTS_LIMIT = 1 << 20


def report(context: Context, exit_code: int, termination_log: Path) -> int:
    """Leave the run's results where the service reads them; returns the exit code to use.

    The termination message carries results and artifacts when they fit in it; otherwise it
    says they are on the output's last line, written here. Results too large for that too end
    the run as an error saying so.
    """
    summary: dict[str, Any] = {"results": context.results, "artifacts": context.artifacts}
    if context.error:
        summary["error"] = context.error
    text = json.dumps(summary)
    if len(text.encode()) > RESULTS_LIMIT:
        message = (
            f"the run's results are {len(text.encode())} bytes as JSON, more than "
            f"{RESULTS_LIMIT}; log large values with context.log_artifact"
        )
        summary = {"error": message}
        text, exit_code = json.dumps(summary), exit_code or 1
        sys.stderr.write(message + "\n")
    if len(text.encode()) > MESSAGE_LIMIT or context.world_size > 1:
        # A rank's termination message is its worker's, not the launcher's: rank 0's results
        # reach the run through the output, which mpirun forwards to the launcher; so does a
        # failing rank's error, which the launcher reports (``.launcher``).
        if context.world_size > 1:
            if not context.is_logging_worker():
                summary = {"error": context.error} if context.error else {}
            text = json.dumps({**summary, "rank": context.rank}) if summary else ""
        if not text:
            return exit_code
        sys.stdout.write("\n" + RESULTS_MARKER + text + "\n")
        sys.stdout.flush()
        text = json.dumps({"results_in_log": True})
    with contextlib.suppress(OSError):  # not in a container: the event file has it all
        termination_log.write_text(text, encoding="utf-8")
    return exit_code

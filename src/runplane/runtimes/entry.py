"""The entry point of a run's container on Kubernetes: ``python -m runplane.runtimes.entry``.

The invocation (code, handler, converted parameters) arrives in the environment, written by
:meth:`Invocation.to_env` when the run was prepared. Results go to the run's event file and,
summarised, to the termination message, where the runtime reads them from the pod status
(Kubernetes keeps at most 4096 bytes there).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

TERMINATION_LOG = Path(os.environ.get("RUNPLANE_TERMINATION_LOG", "/dev/termination-log"))
MESSAGE_LIMIT = 4096


def main() -> int:
    from runplane import names
    from runplane.runtimes.context import Context
    from runplane.runtimes.execute import call_handler
    from runplane.runtimes.invocation import Invocation

    invocation = Invocation.from_env(os.environ)
    run_dir = Path(os.environ.get("RUNPLANE_RUN_DIR") or tempfile.mkdtemp(prefix="runplane-"))
    mounts = json.loads(os.environ.get(names.ENV_MOUNTS, "{}"))
    context = Context(invocation, run_dir, mounts)
    exit_code = call_handler(context, invocation)
    summary = json.dumps({"results": context.results})
    if len(summary.encode()) <= MESSAGE_LIMIT:
        with contextlib.suppress(OSError):  # outside a container the event file has it all
            TERMINATION_LOG.write_text(summary, encoding="utf-8")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())

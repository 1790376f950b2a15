"""The entry point of a run's container on Kubernetes: ``python -m runplane.runtimes.entry``.

Everything arrives in the environment the renderer and the Kubernetes runtime set: the code
(``RUNPLANE_EXEC_CODE``, base64), the handler, parameters and inputs (JSON). Results go to the
run's event file and, summarised, to the termination message, where the runtime reads them
from the pod status (Kubernetes keeps at most 4096 bytes there).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

TERMINATION_LOG = Path(os.environ.get("RUNPLANE_TERMINATION_LOG", "/dev/termination-log"))
MESSAGE_LIMIT = 4096


def main() -> int:
    from runplane.runtimes.context import Context
    from runplane.runtimes.execute import call_handler

    env = os.environ
    code = base64.b64decode(env["RUNPLANE_EXEC_CODE"]).decode("utf-8")
    params = json.loads(env.get("RUNPLANE_PARAMS", "{}"))
    inputs = json.loads(env.get("RUNPLANE_INPUTS", "{}"))
    run_dir = Path(env.get("RUNPLANE_RUN_DIR") or tempfile.mkdtemp(prefix="runplane-"))
    context = Context(
        env.get("RUNPLANE_RUN_UID", ""),
        env.get("RUNPLANE_PROJECT", ""),
        env.get("RUNPLANE_FUNCTION", ""),
        params,
        inputs,
        run_dir,
        json.loads(env.get("RUNPLANE_MOUNTS", "{}")),
    )
    from runplane.spec.handler import read_signature

    handler = env["RUNPLANE_HANDLER"]
    filename = env.get("RUNPLANE_FILENAME", "handler.py")
    signature = read_signature(code, handler, filename)
    exit_code = call_handler(
        context,
        code,
        filename,
        Path(filename).stem or "handler",
        handler,
        signature.takes_context,
        {**params, **inputs},
    )
    summary = json.dumps({"results": context.results})
    if len(summary.encode()) <= MESSAGE_LIMIT:
        with contextlib.suppress(OSError):  # outside a container the event file has it all
            TERMINATION_LOG.write_text(summary, encoding="utf-8")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())

"""The run's own process: load the embedded code, call the handler, record what it returns.

Started by the executor as ``python -m runplane.runtimes.local.child RUN_DIR``. It reads
``RUN_DIR/spec.json`` and imports only the standard library and :mod:`runplane.bootstrap`,
the program that runs every handler, here and in pods.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _die_with_executor(expected_parent: int) -> None:
    """Exit if the executor is gone, and ask Linux to kill us if it goes later."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != expected_parent:
        os._exit(137)


def main(run_dir: Path) -> int:
    os.umask(0o077)  # what the run writes (results, artifacts, files) is its owner's only
    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    _die_with_executor(spec["executor_pid"])
    if spec.get("cpu_ids") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, spec["cpu_ids"])
    os.chdir(run_dir / "work")
    if spec.get("source_dir"):
        sys.path.insert(0, spec["source_dir"])

    from runplane.bootstrap import Context, Invocation, call_handler

    invocation = Invocation.from_json(spec["invocation"])
    return call_handler(Context(invocation, run_dir, spec["mounts"]), invocation)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

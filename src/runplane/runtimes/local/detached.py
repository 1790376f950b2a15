"""A runplane module started as a program of its own: deployments' supervisors and replicas.

Each lives in a session of its own, so it outlives whoever started it and a signal to its
process group reaches nothing else, and appends its output to a file only its owner may read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def start_module(
    module: str, directory: Path, log: Path, env: Mapping[str, str], cwd: Path, banner: str = ""
) -> subprocess.Popen[bytes]:
    """``python -m module directory`` with ``env`` in ``cwd``, its output appended to ``log``
    after the line ``banner`` (if any)."""
    output = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        if banner:
            os.write(output, f"{banner}\n".encode())
        return subprocess.Popen(
            [sys.executable, "-m", module, str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        os.close(output)

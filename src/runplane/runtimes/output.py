"""Where a run's files live, whatever runs it: ``<home>/runs/<uid>/``, output in ``output.log``.

A local run's process writes its output there; the Kubernetes runtime copies a pod's output
there as the kubelet serves it. Either way ``Runtime.logs`` reads the one file, by byte
offset, and a finished run's output outlives the process or pod that wrote it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from runplane.config import Settings
from runplane.runtimes.contract import LOG_CHUNK

OUTPUT = "output.log"


def run_dir(settings: Settings, uid: str) -> Path:
    return settings.local.home / "runs" / uid


def private_dir(path: Path) -> Path:
    """``path`` as a directory only its owner may enter; so is every missing parent it needs
    (a fresh machine has no runplane home yet), since they hold runs' files too."""
    if not path.parent.is_dir():
        private_dir(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def read_output(path: Path, offset: int) -> tuple[bytes, int]:
    """At most :data:`LOG_CHUNK` bytes of the file from ``offset``, and the offset after them.

    A missing file (the run has not started) or an offset past its end reads as nothing. The
    file is opened without following a link, since the run that writes it could replace it
    with one to a file it should not be able to show.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return b"", offset
        raise
    with os.fdopen(fd, "rb") as stream:
        if offset >= os.fstat(fd).st_size:
            return b"", offset
        stream.seek(offset)
        chunk = stream.read(LOG_CHUNK)
    return chunk, offset + len(chunk)

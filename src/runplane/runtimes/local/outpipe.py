"""A local run's output on its way to the run's output file: through a pipe its supervisor
empties, so that the cap on a run's output (:func:`runplane.runtimes.output.append_output`)
holds however much the run prints.

The pipe is a FIFO in the run's directory (``output.pipe``), so the warm launcher's server,
which forks the run's process, opens it by name as a fresh start opens it before ``exec``.
The supervisor holds a write end of its own as well: the pipe never reads as ended while the
run's processes come and go, and once they are all gone (its group killed), what they wrote
is all in the pipe, read until it is empty.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
from pathlib import Path

from runplane.runtimes.output import HELD, OUTPUT, append_output, finish_output, private_dir

PIPE = "output.pipe"
#: What one read takes from the pipe, and the pipe's buffer (a run blocks when it is full
#: until the supervisor has read).
_READ = 1 << 16
_PIPE_SIZE = 1 << 20


class OutputPipe:
    """The pipe of one run's output and its reader, on the run's supervisor thread."""

    def __init__(self, run_dir: Path, cap: int) -> None:
        self._dir = private_dir(run_dir)
        self._cap = cap
        if os.path.lexists(run_dir / HELD) or os.path.lexists(run_dir / OUTPUT):
            # An earlier attempt's output left open (its service died under it): closed now,
            # its end after its start, before this attempt appends.
            finish_output(self._dir, cap)
        path = run_dir / PIPE
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.mkfifo(path, 0o600)
        self._read = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        self._hold = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with contextlib.suppress(OSError):  # a smaller buffer only makes the run wait sooner
            fcntl.fcntl(self._read, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
        self._closed = False
        #: Whether any output came through: a run that printed nothing has nothing to close.
        self._moved = False

    def fileno(self) -> int:
        """Readable when the run wrote output."""
        return self._read

    def pump(self, limit: int = _PIPE_SIZE) -> None:
        """Move what the pipe holds (up to about ``limit`` bytes) to the run's output."""
        moved = 0
        while moved < limit:
            try:
                data = os.read(self._read, _READ)
            except BlockingIOError:
                return
            if not data:
                return
            append_output(self._dir, data, self._cap)
            self._moved = True
            moved += len(data)

    def wait(self, timeout: float) -> None:
        """Sleep up to ``timeout`` seconds, moving output as it comes."""
        ready, _, _ = select.select([self._read], [], [], timeout)
        if ready:
            self.pump()

    def close(self) -> None:
        """Once the run's processes are all gone: move the rest, and close the output (its
        held end after a marker, compressed; :func:`finish_output`), unless nothing came
        through (an earlier attempt's output stays closed as it was). Closing again does
        nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self.pump(limit=1 << 62)
        finally:
            os.close(self._read)
            os.close(self._hold)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._dir / PIPE)
        if self._moved:
            finish_output(self._dir, self._cap)


def output_target(run_dir: Path) -> Path:
    """Where a run's process writes its output: its pipe, or (a run started without one) its
    output file."""
    pipe = run_dir / PIPE
    return pipe if os.path.lexists(pipe) else run_dir / OUTPUT

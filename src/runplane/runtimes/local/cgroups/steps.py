"""A run's cgroup as steps on files: made before the run's first process starts, counted and
removed once nothing runs in it. runplane works the steps out (:mod:`.v1`, :mod:`.v2`); the
process that starts the run carries them out: runplane itself for a fresh interpreter, the warm
launcher's server for a forked one, so that making and removing a run's group costs runplane's
busy process nothing. The server loads this file by its path: the standard library only, and
any Python 3.9+.

The steps are a JSON object: ``dirs``, the group's directory in each hierarchy, made in order;
``writes``, each a control file, its value, and whether a failure is ignored (a controller file
some kernels lack); ``joins``, the files a process writes its pid to, to move into the group;
``empty``, a file and the line it holds when no process is left in the group or beneath it;
``counters``, the files read once it is empty; ``removes``, the directories, in removal order.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

#: The steps of one run's group (see the module's description).
Steps = dict[str, Any]


def read(path: str | os.PathLike[str]) -> str:
    """A control file's text. Plain descriptors, not text files: a run's start and end read
    and write a dozen of these, and a buffered text wrapper costs more than the system calls."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8").strip()


def write(path: str | os.PathLike[str], value: str | int) -> None:
    """Write a control file in one system call, as the kernel expects a value."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(value).encode("utf-8"))
    finally:
        os.close(fd)


def make(steps: Steps) -> None:
    """Make the group and set its limits; on failure nothing made is left (a directory that was
    already there raises ``FileExistsError``, and stays)."""
    made: list[str] = []
    try:
        for directory in steps["dirs"]:
            os.mkdir(directory)
            made.append(directory)
        for path, value, optional in steps["writes"]:
            try:
                write(path, value)
            except OSError:
                if not optional:
                    raise
    except OSError:
        for directory in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        raise


def join(steps: Steps, pid: int) -> None:
    """Move process ``pid`` into the group (each hierarchy's, on v1)."""
    for path in steps["joins"]:
        write(path, pid)


def counter_texts(steps: Steps) -> dict[str, str]:
    """The texts of the group's counter files ("" for one that cannot be read)."""
    return {name: read_or_empty(name) for name in steps["counters"]}


def read_or_empty(path: str) -> str:
    """A counter file's text, "" if it cannot be read (the group is gone)."""
    try:
        return read(path)
    except OSError:
        return ""


def finish(steps: Steps) -> dict[str, Any] | None:
    """If no process is left in the group: its counters' texts and whether it was removed;
    ``None`` while something still runs in it (runplane then kills what is left)."""
    path, line = steps["empty"]
    try:
        if line not in read(path).splitlines():
            return None
    except OSError:
        return None
    counters = counter_texts(steps)
    removed = True
    for directory in steps["removes"]:
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            pass
        except OSError:
            removed = False
    return {"counters": counters, "removed": removed}

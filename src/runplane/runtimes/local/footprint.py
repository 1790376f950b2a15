"""What a fresh interpreter running the bootstrap is charged, which a warm run inherits uncharged.

A pod's container starts its own interpreter, and the kernel charges the pod's cgroup for every
page it touches: the interpreter, the bootstrap's imports, a handler's call. A run forked by the
warm launcher (:mod:`.warm`) inherits those pages from the fork server, whose cgroup they were
charged to, so its own group counts only what it adds. Left so, one function with one limit
completes here and is OOMKilled on the cluster, and every peak recorded here is low.

The difference is measured, not guessed: a fresh interpreter is started in a cgroup of its own
and runs a no-op handler through the bootstrap, as a run's process would (``forkserver.py
--footprint``), and the group's peak is the footprint. It depends on the interpreter, runplane's
own code and the cgroup version, and is measured once for each and kept in the runplane home
(``footprints.json``). A warm run's group is then limited to its limit less the footprint, and
its peak is reported as the group's peak plus the footprint: the charge a fresh process would
have had. Runs started fresh are charged their interpreter by the kernel already.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import tempfile
from pathlib import Path

from runplane.runtimes.local.cgroups import Hierarchy, Limits

log = logging.getLogger(__name__)

_HERE = Path(__file__).resolve().parent
SERVER = _HERE / "forkserver.py"
#: What the footprint depends on besides the interpreter: the code a run's process loads.
_CODE = (SERVER, _HERE / "child.py", _HERE.parents[1] / "bootstrap" / "__init__.py")
#: The measuring process waits on its standard input until it is in its group.
_GATE = 'read -r go; [ "$go" = go ] || exit 125; exec "$0" "$@" </dev/null'
#: How long the measurement may take before runplane gives up on it (and charges nothing).
TIMEOUT = 60.0


def inherited(python: str, env: dict[str, str], hierarchy: Hierarchy, home: Path) -> int:
    """The bytes a fresh ``python`` running the bootstrap is charged in a cgroup of
    ``hierarchy``: kept in ``home`` once measured; 0 (and a warning) if it cannot be."""
    key = _key(python, hierarchy)
    cache = home / "footprints.json"
    known = _read(cache)
    if key in known:
        return known[key]
    try:
        footprint = measure(python, env, hierarchy)
    except (OSError, subprocess.SubprocessError, RuntimeError) as error:
        log.warning(
            "cannot measure a fresh interpreter's memory; warm runs are charged "
            "only what they add to it: %s",
            error,
        )
        return 0
    known[key] = footprint
    with contextlib.suppress(OSError):
        _write(cache, known)
    return footprint


def measure(python: str, env: dict[str, str], hierarchy: Hierarchy) -> int:
    """Start ``python`` running a no-op handler through the bootstrap in a new group of
    ``hierarchy`` and return the group's peak memory."""
    group = hierarchy.create(f"footprint-{os.getpid()}", Limits())
    try:
        process = subprocess.Popen(
            ["/bin/sh", "-c", _GATE, python, str(SERVER), "--footprint"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            cwd="/",
        )
        try:
            group.add(process.pid)
            _, error = process.communicate(b"go\n", timeout=TIMEOUT)
        finally:
            process.kill()
            process.wait()
        if process.returncode != 0:
            raise RuntimeError(
                f"{python} {SERVER.name} --footprint exited with {process.returncode}: "
                + error.decode(errors="replace").strip()[-500:]
            )
        return group.counters().peak_memory
    finally:
        group.kill()
        group.remove()


def _key(python: str, hierarchy: Hierarchy) -> str:
    """The interpreter (its file, as it is now), runplane's code a run loads, the cgroup
    version: a change to any of them measures again."""
    path = os.path.realpath(python)
    stamps = [os.stat(path), *(os.stat(code) for code in _CODE if code.exists())]
    return "|".join([path, hierarchy.version, *(f"{s.st_size}:{s.st_mtime_ns}" for s in stamps)])


def _read(cache: Path) -> dict[str, int]:
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int)}


def _write(cache: Path, known: dict[str, int]) -> None:
    """Replace the cache whole: a reader never sees half of it."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=cache.parent, prefix=".footprints-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(known, file)
        os.replace(temporary, cache)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise

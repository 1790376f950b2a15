"""What a fresh interpreter running the bootstrap is charged, which a warm run inherits uncharged.

A pod's container starts its own interpreter, and the kernel charges the pod's cgroup for every
page it touches: the interpreter, the bootstrap's imports, a handler's call. A run forked by the
warm launcher (:mod:`.warm`) inherits those pages from the fork server, whose cgroup they were
charged to, so its own group counts only what it adds. Left so, one function with one limit
completes here and is OOMKilled on the cluster, and every peak recorded here is low.

The difference is measured, not guessed (``child.py --footprint``): a fresh interpreter is
started in a cgroup of its own and runs a no-op handler as a fresh run's process does, and what
its group is charged is read; then it becomes a fork server as the warm launcher's does and
forks a process into a second group, which runs the no-op as a forked run's process does. What
the first group was charged beyond the second is the footprint: the pages a forked run writes
to, and so has copied into its own group, are not counted twice. It
depends on the interpreter, runplane's own code and the cgroup version, and is measured once for
each and kept in the runplane home (``footprints.json``). A warm run's group is then limited to
its limit less the footprint, and its peak is reported as the group's peak plus the footprint:
the charge a fresh process would have had. Runs started fresh are charged their interpreter by
the kernel already.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from runplane.bootstrap import Invocation
from runplane.runtimes.local.cgroups import Hierarchy, Limits, RunGroup

log = logging.getLogger(__name__)

_HERE = Path(__file__).resolve().parent
CHILD = _HERE / "child.py"
#: What the footprint depends on besides the interpreter: the code a run's process loads.
_CODE = (CHILD, _HERE / "forkserver.py", _HERE.parents[1] / "bootstrap" / "__init__.py")
#: The handler of the probe's runs.
_NOOP = Invocation(
    "footprint", "", "footprint", "handler", "def handler(context):\n    pass\n", "noop.py"
)
#: The measuring process waits on its standard input until it is in its group (and its forked
#: child reads the same input, until it is in its own).
_GATE = 'read -r go; [ "$go" = go ] || exit 125; exec "$0" "$@"'
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
    except Exception as error:  # never a reason for a run to fail: it is charged less
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
    """What a fresh run's process of ``python`` is charged for a no-op handler, less what a
    forked one is charged for it (``child.py --footprint``), each in a new group of
    ``hierarchy``: what a forked run is charged too little."""
    scratch = Path(tempfile.mkdtemp(prefix="runplane-footprint-"))
    name = f"footprint-{secrets.token_hex(4)}"  # two runtimes of one process may measure at once
    fresh = hierarchy.create(name, Limits())
    try:
        forked = hierarchy.create(f"{name}-forked", Limits())
        try:
            charged = _probe(python, env, scratch, fresh, forked)
            return max(0, charged - forked.counters().peak_memory)
        finally:
            forked.kill()
            forked.remove()
    finally:
        fresh.kill()
        fresh.remove()
        shutil.rmtree(scratch, ignore_errors=True)


def _probe(
    python: str, env: dict[str, str], scratch: Path, fresh: RunGroup, forked: RunGroup
) -> int:
    """Run the probe, in ``fresh`` from its start and its forked process in ``forked`` before
    that does anything; returns what ``fresh`` was charged before the probe forked."""
    for name in ("fresh", "forked"):
        (scratch / name / "work").mkdir(parents=True)
        spec = {"invocation": _NOOP.to_json(), "mounts": {}, "executor_pid": os.getpid()}
        (scratch / name / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    process = subprocess.Popen(
        ["/bin/sh", "-c", _GATE, python, str(CHILD), "--footprint", str(scratch)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd="/",
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    timer = threading.Timer(TIMEOUT, process.kill)
    timer.start()
    charged, said = 0, b""
    try:
        fresh.add(process.pid)
        process.stdin.write(b"go\n")
        process.stdin.flush()
        if process.stdout.readline() == b"fresh\n":
            charged = fresh.counters().peak_memory
            process.stdin.write(b"go\n")
            process.stdin.flush()
            said = process.stdout.readline().strip()
            if said.isdigit():
                forked.add(int(said))
                process.stdin.write(b"go\n")
        process.stdin.close()
        error = process.stderr.read()
        process.wait()
    finally:
        timer.cancel()
        process.kill()
        process.wait()
    if process.returncode != 0 or not said.isdigit():
        raise RuntimeError(
            f"{python} {CHILD.name} --footprint exited with {process.returncode}: "
            + error.decode(errors="replace").strip()[-500:]
        )
    return charged


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

"""The run's own process: load the embedded code, call the handler, record what it returns.

Started by the executor as ``python .../runtimes/local/child.py RUN_DIR``, already in the run's
cgroup and as the run's user. It reads ``RUN_DIR/spec.json`` and imports only the standard
library and :mod:`runplane.bootstrap`, the program that runs every handler, here and in pods:
from runplane's package when the interpreter has it, else from its folder beside this one's, so
any Python 3.9+ (``local.python``) can run a run.

``child.py --check DIR`` is the start-up probe of runs under users of their own: it loads what
a run loads and reaches ``DIR`` as a run would, and says what stops it. ``child.py --footprint
DIR`` is the probe of what a run's process is charged (``footprint.py``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_HERE = Path(__file__).resolve().parent
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38


_libc: Any = None


def _prctl(option: int, value: int) -> None:
    global _libc
    if sys.platform.startswith("linux"):
        if _libc is None:  # loaded once: the warm launcher's children find it loaded
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True)
        _libc.prctl(option, value, 0, 0, 0)


def _die_with_executor(expected_parent: int) -> None:
    """Exit if the executor is gone, and ask Linux to kill us if it goes later."""
    import signal

    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != expected_parent:
        os._exit(137)


def _bootstrap() -> ModuleType:
    try:
        import runplane.bootstrap as bootstrap
    except ImportError:  # another interpreter than runplane's: load the package's folder
        import importlib.util

        folder = _HERE.parents[1] / "bootstrap"
        spec = importlib.util.spec_from_file_location(
            "runplane_bootstrap", folder / "__init__.py", submodule_search_locations=[str(folder)]
        )
        assert spec is not None
        assert spec.loader is not None
        bootstrap = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = bootstrap
        spec.loader.exec_module(bootstrap)
    return bootstrap


def main(run_dir: Path, parent: int | None = None, spec: dict[str, Any] | None = None) -> int:
    """Run the run of ``run_dir``; ``parent`` is the process whose end ends it (the executor's,
    or the warm launcher's server, :mod:`forkserver`, which hands over the ``spec`` it was
    sent instead of ``RUN_DIR/spec.json``)."""
    os.umask(0o077)  # what the run writes (results, artifacts, files) is its owner's only
    if spec is None:
        spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    _die_with_executor(spec["executor_pid"] if parent is None else parent)
    if spec.get("no_new_privileges"):
        _prctl(_PR_SET_NO_NEW_PRIVS, 1)
    if spec.get("cpu_ids") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, spec["cpu_ids"])
    os.chdir(run_dir / "work")
    if spec.get("source_dir"):
        sys.path.insert(0, spec["source_dir"])
    bootstrap = _bootstrap()
    invocation = bootstrap.Invocation.from_json(spec["invocation"])
    context = bootstrap.Context(invocation, run_dir, spec["mounts"])
    code: int = bootstrap.call_handler(context, invocation)
    # The last line: how the handler ended, for a service that dies before it records the
    # end to read at its next start (runtimes/local/remains.py).
    context._emit({"type": "exit", "code": code, "attempt": invocation.attempt})
    return code


def check(directory: Path) -> int:
    """The probe: 0 when a run's user can load a run and pass through ``directory``."""
    try:
        _bootstrap()
    except Exception as error:
        sys.stderr.write(f"{sys.executable} cannot load runplane's bootstrap: {error}")
        return 1
    if not os.access(directory, os.X_OK):
        blocked = next(
            (p for p in reversed([directory, *directory.parents]) if not os.access(p, os.X_OK)),
            directory,
        )
        sys.stderr.write(f"it cannot pass through {blocked} to reach {directory}")
        return 1
    return 0


def footprint(scratch: Path) -> int:
    """The probe of what a run's process is charged (``footprint.py``): the run of
    ``SCRATCH/fresh`` here, as a fresh run's process runs it; then, once ``go`` comes on
    standard input (what this process was charged has been read), the run of
    ``SCRATCH/forked`` in a process forked as the warm launcher's server forks one."""
    code = main(scratch / "fresh")
    sys.stdout.write("fresh\n")
    sys.stdout.flush()
    if code != 0 or os.read(0, 3) != b"go\n":
        return code or 125
    import importlib.util

    spec = importlib.util.spec_from_file_location("runplane_forkserver", _HERE / "forkserver.py")
    assert spec is not None
    assert spec.loader is not None
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    forked: int = server.fork_probe(sys.modules[__name__], scratch / "forked")
    return forked


if __name__ == "__main__":
    if sys.path and Path(sys.path[0]).resolve() == _HERE:
        del sys.path[0]  # run as a script: its directory's modules are not the handler's
    if sys.argv[1] == "--check":
        sys.exit(check(Path(sys.argv[2])))
    if sys.argv[1] == "--footprint":
        sys.exit(footprint(Path(sys.argv[2])))
    sys.exit(main(Path(sys.argv[1])))

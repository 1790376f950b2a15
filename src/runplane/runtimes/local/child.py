"""The run's own process: load the embedded code, call the handler, record what it returns.

Started by the executor as ``python -m runplane.runtimes.local.child RUN_DIR``. It reads
``RUN_DIR/spec.json`` and imports only the standard library and the handler's context.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
import types
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
    spec = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    _die_with_executor(spec["executor_pid"])
    if spec.get("cpu_ids") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, spec["cpu_ids"])
    work = run_dir / "work"
    os.chdir(work)
    if spec.get("source_dir"):
        sys.path.insert(0, spec["source_dir"])

    from runplane.runtimes.context import Context

    context = Context(
        spec["uid"],
        spec["project"],
        spec["function"],
        spec["params"],
        spec["inputs"],
        run_dir,
        spec["mounts"],
    )
    try:
        module = types.ModuleType(spec["module"])
        module.__file__ = spec["filename"]
        sys.modules[spec["module"]] = module
        exec(compile(spec["code"], spec["filename"], "exec"), module.__dict__)
        handler = getattr(module, spec["handler"])
        arguments = dict(spec["params"])
        arguments.update(spec["inputs"])
        returned = handler(context, **arguments) if spec["takes_context"] else handler(**arguments)
        if isinstance(returned, dict) and all(isinstance(k, str) for k in returned):
            context.log_results(returned)
        elif returned is not None:
            context.log_result("return", returned)
    except SystemExit as exit_request:
        code = exit_request.code
        if code in (None, 0):
            return 0
        context._emit({"type": "error", "message": f"the handler exited with {code!r}"})
        return code if isinstance(code, int) else 1
    except BaseException as error:  # everything else the handler raises is reported
        traceback.print_exc()
        message = f"{type(error).__name__}: {error}"
        context._emit({"type": "error", "message": message})
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

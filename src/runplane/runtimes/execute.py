"""Calling a handler: load embedded code as a module, call it with its context, record what
it returns or raises. Shared by the local child process and the pod entry point; standard
library only, since it runs inside the run."""

from __future__ import annotations

import sys
import traceback
import types
from typing import Any

from runplane.runtimes.context import Context


def call_handler(
    context: Context,
    code: str,
    filename: str,
    module_name: str,
    handler: str,
    takes_context: bool,
    arguments: dict[str, Any],
) -> int:
    """Run ``handler`` from ``code``; returns the process exit code."""
    try:
        module = types.ModuleType(module_name)
        module.__file__ = filename
        sys.modules[module_name] = module
        exec(compile(code, filename, "exec"), module.__dict__)
        function = getattr(module, handler)
        returned = function(context, **arguments) if takes_context else function(**arguments)
        if isinstance(returned, dict) and all(isinstance(k, str) for k in returned):
            context.log_results(returned)
        elif returned is not None:
            context.log_result("return", returned)
    except SystemExit as exit_request:
        code_ = exit_request.code
        if code_ in (None, 0):
            return 0
        context._emit({"type": "error", "message": f"the handler exited with {code_!r}"})
        return code_ if isinstance(code_, int) else 1
    except BaseException as error:  # everything else the handler raises is reported
        traceback.print_exc()
        context._emit({"type": "error", "message": f"{type(error).__name__}: {error}"})
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0

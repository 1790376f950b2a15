"""Calling a handler: load its code as a module, call it with its context, record what it
returns or raises. Shared by the local child process and the pod entry point; standard
library only, since it runs inside the run."""

from __future__ import annotations

import sys
import traceback
import types

TYPE_CHECKING = False
if TYPE_CHECKING:
    from runplane.runtimes.context import Context
    from runplane.runtimes.invocation import Invocation


def call_handler(context: Context, invocation: Invocation) -> int:
    """Run the invocation's handler; returns the process exit code."""
    try:
        module = types.ModuleType(invocation.module_name)
        module.__file__ = invocation.filename
        sys.modules[invocation.module_name] = module
        exec(compile(invocation.code, invocation.filename, "exec"), module.__dict__)
        function = getattr(module, invocation.handler)
        arguments = invocation.arguments
        returned = (
            function(context, **arguments) if invocation.takes_context else function(**arguments)
        )
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
        context._emit({"type": "error", "message": f"{type(error).__name__}: {error}"})
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0

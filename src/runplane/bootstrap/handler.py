"""Calling a run's handler: its module loaded from the embedded code, its arguments as the
handler declares them, what it returns recorded, and how it ended as an exit code."""

from __future__ import annotations

import inspect
import json
import signal
import sys
import traceback
import types

from .context import Context, Terminated, _json_value
from .current import become_current
from .invocation import INIT_ARGS, Invocation

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def load_module(invocation: Invocation) -> types.ModuleType:
    """The handler's module, loaded from the embedded code under its file's name; without a
    handler the code is a script, and its main block runs (reading ``get_or_create_ctx``)."""
    module = types.ModuleType(invocation.module_name)
    module.__file__ = invocation.filename
    sys.modules[invocation.module_name] = module
    if not invocation.handler:
        module.__name__ = "__main__"
        sys.argv = [invocation.filename]
    # dont_inherit: the handler's code is compiled as its own module, without this module's
    # `from __future__ import annotations` (its annotations stay objects).
    compiled = compile(invocation.code, invocation.filename, "exec", dont_inherit=True)
    exec(compiled, module.__dict__)
    return module


def _arguments(function: Any, context: Context, invocation: Invocation) -> dict[str, Any]:
    """The handler's arguments: parameters as converted, inputs as :class:`DataItem` (read
    into a DataFrame when the handler's annotation asks for one)."""
    arguments = invocation.arguments
    annotations = getattr(function, "__annotations__", {})
    for key in invocation.inputs:
        if key not in arguments:
            continue
        item = context.inputs[key]
        hint = invocation.hints.get(key) or annotations.get(key)
        hint_name = hint if isinstance(hint, str) else getattr(hint, "__name__", "")
        arguments[key] = item.as_df() if hint_name.endswith("DataFrame") else item
    return arguments


def log_returned(context: Context, returns: list[str], returned: Any) -> None:
    """Record what the handler returned: by ``returns`` (``key`` or ``key:kind``, one per
    returned value) when given; else a dict as one result per key and, as MLRun records it,
    the whole value as ``return``."""
    if returns:
        values = returned if isinstance(returned, tuple) and len(returns) > 1 else (returned,)
        for index in range(min(len(returns), len(values))):  # zip(strict=) is not 3.9
            key, _, kind = (part.strip() for part in returns[index].partition(":"))
            _log_value(context, key, kind, values[index])
        return
    if returned is None:
        return
    if isinstance(returned, dict) and all(isinstance(k, str) for k in returned):
        context.log_results(returned)
    try:
        context.log_result("return", returned)
    except TypeError:
        context.log_result("return", str(returned))


def _log_value(context: Context, key: str, kind: str, value: Any) -> None:
    kind = kind or _kind_of(value)
    if kind == "result":
        context.log_result(key, value)
    elif kind == "dataset":
        context.log_dataset(key, value)
    elif kind in ("file", "path"):
        context.log_artifact(key, local_path=str(value))
    elif kind in ("artifact", "text", "bytes"):
        context.log_artifact(key, body=value if isinstance(value, (str, bytes)) else str(value))
    elif kind == "object":
        import pickle

        context.log_artifact(key, body=pickle.dumps(value), local_path=f"{key}.pkl")
    else:
        raise ValueError(
            f"returns: {key}:{kind} - kinds are result, dataset, file, artifact and object"
        )


def _kind_of(value: Any) -> str:
    if type(value).__name__ == "DataFrame":
        return "dataset"
    if isinstance(value, bytes):
        return "artifact"
    try:
        json.dumps(_json_value("", value))
        return "result"
    except TypeError:
        return "object"


def _handler(module: Any, name: str, context: Context, init_args: Any) -> Any:
    """The function ``name`` of ``module``; ``Class::method`` is the method of an instance
    made with ``init_args``, and the context when the class takes one, as MLRun makes it."""
    if "::" not in name:
        return getattr(module, name)
    class_name, _, method = name.partition("::")
    cls = getattr(module, class_name)
    init_args = dict(init_args or {})
    if "context" in inspect.signature(cls).parameters:
        init_args.setdefault("context", context)
    return getattr(cls(**init_args), method)


def call_handler(context: Context, invocation: Invocation) -> int:
    """Run the invocation's handler (or, without one, its code as a script); returns the
    process exit code."""
    # SIGTERM (a spot reclaim, a drain, an abort): the preemption callbacks run, then the
    # handler is stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: context._preempt())
    become_current(context)
    try:
        module = load_module(invocation)
        if invocation.handler:
            init_args = invocation.arguments.get(INIT_ARGS)
            function = _handler(module, invocation.handler, context, init_args)
            arguments = _arguments(function, context, invocation)
            arguments.pop(INIT_ARGS, None)
            if invocation.takes_context:
                returned = function(context, **arguments)
            else:
                returned = function(**arguments)
            log_returned(context, invocation.returns, returned)
        context._log_iteration_table()
    except Terminated:
        if context.world_size == 1:  # a rank is stopped by its launcher, which says why
            context._emit({"type": "error", "message": "stopped by SIGTERM"})
        return 128 + signal.SIGTERM
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
    if context.error and context.state == "error":  # the handler said it failed
        context._emit({"type": "error", "message": context.error})
        return 1
    return 0

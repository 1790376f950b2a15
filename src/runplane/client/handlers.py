"""A Python function given as a run's handler (``fn.run(handler=train)``): the code that
defines it, to embed in the function, since a run executes in its own process.

The code is the function's module (its file, or a notebook's cells) reduced to what defines
things: imports, functions, classes and constant assignments. Statements that do work at the
top of a script or notebook (the ``fn.run(...)`` call itself, say) are left out, or the run
would do them again. ``# mlrun: start-code``/``end-code`` sections, when the code has them,
choose the code instead, and ``# mlrun: ignore`` leaves a cell or line out.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runplane.errors import InvalidValueError
from runplane.spec.annotations import code_names, definitions, has_markers, select_code
from runplane.spec.loaders import notebook_cells


def handler_code(handler: Callable[..., Any]) -> tuple[str, str, str]:
    """``(code, filename, name)`` for a module-level Python function."""
    name = getattr(handler, "__name__", "")
    if not inspect.isfunction(handler) or name == "<lambda>" or "<locals>" in handler.__qualname__:
        raise InvalidValueError(
            "handler",
            handler,
            "a handler is a function defined at the top of a module or notebook, or its name",
            "fn.run(handler=train) or fn.run(handler='train')",
        )
    module = sys.modules.get(handler.__module__)
    source, filename = _module_source(handler, module)
    code = select_code(source, "") if has_markers(source) else definitions(source)
    if name not in code_names(code):
        code = definitions(source)  # the markers left the handler out: use the definitions
    if name not in code_names(code):
        code = inspect.getsource(handler)
    return code, filename, name


def _module_source(handler: Callable[..., Any], module: Any) -> tuple[str, str]:
    path = getattr(module, "__file__", None)
    if path and Path(path).suffix == ".py" and Path(path).is_file():
        return Path(path).read_text(encoding="utf-8"), Path(path).name
    cells = notebook_cells()
    if cells:
        return "\n\n".join(cells) + "\n", "notebook.py"
    try:
        return inspect.getsource(handler), f"{handler.__name__}.py"
    except (OSError, TypeError):
        raise InvalidValueError(
            "handler",
            handler.__name__,
            "its code cannot be found (define it in a .py file or a notebook cell)",
            "code_to_function('train', filename='train.py', handler='train')",
        ) from None

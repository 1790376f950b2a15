"""The run context, for code that runs outside a handler.

A handler receives its ``context`` (:class:`runplane.bootstrap.Context`, MLRun's
``MLClientCtx``). Code that is not a handler (a script run as a function without one, or a
notebook) gets it with :func:`get_or_create_ctx`: inside a run, the run's own context; outside
any run, a context of this process whose artifacts and logged values are kept on this machine
(under ``~/.runplane/contexts/<uid>``) but which is not a recorded run.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

from runplane.bootstrap import Context, DataItem, current_context, log_returned, make_context

#: MLRun's name of the run context.
MLClientCtx = Context

__all__ = ["Context", "DataItem", "MLClientCtx", "get_dataitem", "get_or_create_ctx", "handler"]


def get_or_create_ctx(
    name: str,
    event: Any = None,
    spec: Any = None,
    with_env: bool = True,
    rundb: str = "",
    project: str = "",
    upload_artifacts: bool = False,
    labels: dict[str, str] | None = None,
) -> Context:
    """The context of the run this code is part of, or a new one named ``name``.

    A new context takes its parameters from ``spec`` (a dict with ``spec.parameters``, as a
    task's ``to_dict()`` has it) and, with ``with_env``, from ``RUNPLANE_PARAMS`` (JSON).
    """
    running = current_context()
    if running is not None:
        return running
    from runplane.config import current

    params: dict[str, Any] = {}
    if with_env and os.environ.get("RUNPLANE_PARAMS"):
        params.update(json.loads(os.environ["RUNPLANE_PARAMS"]))
    if isinstance(spec, dict):
        params.update((spec.get("spec") or {}).get("parameters") or {})
    import uuid

    uid = uuid.uuid4().hex
    context = make_context(
        name,
        current().local.home / "contexts" / uid,
        params=params,
        project=project,
        uid=uid,
    )
    context.set_label("kind", "local")  # MLRun's label of a context made outside a run
    for key, value in (labels or {}).items():
        context.set_label(key, value)
    return context


def get_dataitem(url: str, secrets: Any = None, db: Any = None) -> DataItem:
    """A file as a data item (``.local()``, ``.get()``, ``.as_df()``): a local path or
    ``file://`` URL (other stores are not part of runplane)."""
    from runplane.bootstrap import OutOfScope
    from runplane.errors import OutOfScopeError

    item = DataItem(url)
    try:
        item.local()  # refuses other stores now, naming them
    except OutOfScope as error:
        raise OutOfScopeError(error.feature, str(error).split(": ", 1)[-1]) from None
    return item


def handler(
    func: Callable[..., Any] | None = None,
    labels: dict[str, str] | None = None,
    outputs: list[str] | None = None,
    inputs: bool | dict[str, Any] = True,
) -> Any:
    """MLRun's ``@mlrun.handler`` decorator: when the function runs as a run's handler, its
    ``labels`` are set on the run and its return values are logged by ``outputs`` (``key``
    or ``key:kind`` per value, as ``run(returns=...)``). Outside a run it changes nothing."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def logged(*args: Any, **kwargs: Any) -> Any:
            returned = function(*args, **kwargs)
            context = current_context()
            if context is not None:
                for key, value in (labels or {}).items():
                    context.set_label(key, value)
                if outputs:
                    log_returned(context, list(outputs), returned)
            return returned

        return logged

    return decorate(func) if func is not None else decorate

"""A call of ``fn.run(...)`` made ready to submit: the task, handler, name, project, inputs
and hyperparameters it names, applied to a copy of the function.

``fn.run`` takes runplane's arguments and MLRun's; this module turns either into one
:class:`Call`, so the submitting code has one shape to handle. Nothing here runs anything.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runplane.errors import InvalidValueError, NotFoundError, OutOfScopeError
from runplane.spec.function import BuildSpec, Function
from runplane.spec.labels import check_run_name, normalize_name
from runplane.spec.run_options import RunArguments, RunOptions
from runplane.spec.task import HyperParamOptions, RunTemplate, check_hyperparams

#: The data stores runplane reads: local paths (and mounted volumes). Anything else names an
#: MLRun data store that is not part of runplane.
_LOCAL_SCHEMES = ("", "file")


@dataclass
class Call:
    """What to submit: the function as this run needs it, the run's options, and the
    hyperparameter search that spreads it over child runs, if any."""

    fn: Function
    options: RunOptions = field(default_factory=RunOptions)
    hyperparams: dict[str, list[Any]] = field(default_factory=dict)
    search: HyperParamOptions = field(default_factory=HyperParamOptions)
    source_dir: str = ""

    @property
    def iterates(self) -> bool:
        return bool(self.hyperparams or self.search.param_file)


def task_of(runspec: Any) -> RunTemplate | None:
    """``runspec`` as a task, when it is one (a ``RunTemplate``, a run handle's task, or its
    dict form); ``None`` when it is runplane's positional ``params``."""
    if runspec is None:
        return None
    if isinstance(runspec, RunTemplate):
        return runspec
    if isinstance(runspec, Mapping) and ("spec" in runspec or "metadata" in runspec):
        return RunTemplate.from_dict(runspec)
    if isinstance(runspec, Mapping):
        return None
    raise InvalidValueError(
        "runspec",
        runspec,
        "a task (new_task(...)) or a mapping of parameters",
        "fn.run(new_task(params={'p1': 1})) or fn.run(params={'p1': 1})",
    )


def prepare(fn: Function, given: RunArguments) -> Call:
    """The call's function (a copy: the caller's is left as it was) and arguments."""
    task = task_of(given.runspec)
    params = given.params
    if task is None and isinstance(given.runspec, Mapping):
        params = {**given.runspec, **(params or {})}
    task = task or RunTemplate()
    fn = fn.model_copy(deep=True)
    handler = given.handler
    _set_handler(fn, handler if handler is not None else task.spec.handler, given.workdir)
    if not fn.spec.build.source and not fn.spec.command:  # module.function of the source
        _set_handler(fn, fn.spec.handler, given.workdir)
    name = given.name or task.metadata.name
    if name:
        fn.metadata.name = check_run_name(
            "run(name=...)", str(normalize_name("run(name=...)", name))
        )
    elif not fn.metadata.name:  # named after the handler, made a valid name without a word
        fn.metadata.name = fn.spec.handler.replace("_", "-").lower().strip("-") or "job"
    project = given.project or task.metadata.project
    if project:
        fn.metadata.project = project
    if given.labels or task.metadata.labels:
        fn.set_labels({**task.metadata.labels, **dict(given.labels or {})})
    if given.returns or task.spec.returns:
        fn.spec.returns = list(given.returns or task.spec.returns)
    path = given.artifact_path or task.spec.artifact_path
    if path:
        fn.spec.artifact_path = _local_path("artifact_path", path)
    search = given.hyper_param_options or task.spec.hyper_param_options
    if given.selector is not None:
        search = HyperParamOptions(**{**search.to_dict(), "selector": given.selector})
    options = RunOptions(
        params={**task.spec.parameters, **dict(params or {})},
        inputs=_inputs({**task.spec.inputs, **dict(given.inputs or {})}),
        state_thresholds=dict(given.state_thresholds or {}),
    )
    return Call(
        fn=fn,
        options=options,
        hyperparams=(
            check_hyperparams(given.hyperparams) if given.hyperparams else task.spec.hyperparams
        ),
        search=search,
        source_dir=str(Path(given.workdir).resolve()) if given.workdir else "",
    )


def _set_handler(fn: Function, handler: Any, workdir: str) -> None:
    """A Python function's module code is embedded; ``module.function`` (or
    ``module:function``) embeds that module's file, found under ``workdir`` (default: the
    current directory), when the function has no code."""
    if handler is None or handler == "":
        return
    if callable(handler):
        from runplane.client.handlers import handler_code

        code, filename, handler = handler_code(handler)
        fn.spec.build = BuildSpec(
            source=base64.b64encode(code.encode()).decode(), filename=filename
        )
    elif not isinstance(handler, str):
        raise InvalidValueError(
            "handler", handler, "a handler is a function or its name", "handler='train'"
        )
    elif (
        not fn.spec.build.source
        and not fn.spec.command
        and "::" not in handler
        and ("." in handler or ":" in handler)
    ):
        module, _, handler = handler.replace(":", ".").rpartition(".")
        archive = fn.spec.build.source_archive
        base = Path(archive) if archive else Path(workdir or ".").resolve()
        path = base / (module.replace(".", os.sep) + ".py")
        if not path.is_file() and _installed(module, handler):
            # A function of an installed module (``json.dumps``): the run imports it there.
            code = (
                f"import {module}\n\n\ndef {handler}(**params):\n"
                f"    return {module}.{handler}(**params)\n"
            )
            fn.spec.build = BuildSpec(
                source=base64.b64encode(code.encode()).decode(),
                filename=f"{module.replace('.', '_')}_{handler}.py",
            )
            fn.spec.handler = handler
            return
        if not path.is_file():
            raise NotFoundError(
                f"handler: module {module!r} is not a file under {str(base)!r} (looked for "
                f"{str(path)!r}); set the project's source to the code's directory"
            )
        code = path.read_text(encoding="utf-8")
        fn.spec.build = BuildSpec(
            source=base64.b64encode(code.encode()).decode(), filename=path.name
        )
    fn.spec.handler = handler


def _installed(module: str, function: str) -> bool:
    """Whether ``module`` is importable here, found without running it, and both names are
    Python names (they are written into the run's code)."""
    import importlib.util

    if not function.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _inputs(inputs: Mapping[str, Any]) -> dict[str, str]:
    """Inputs by name (a ``"name: type"`` key also says what type to read it as), each a
    local path: relative paths are the caller's, other stores are refused by name."""
    checked: dict[str, str] = {}
    for key, value in inputs.items():
        name, colon, hint = (part.strip() for part in str(key).partition(":"))
        path = _local_path(f"inputs[{name!r}]", str(getattr(value, "url", value)))
        checked[f"{name}: {hint}" if colon and hint else name] = path
    return checked


def _local_path(field_name: str, path: str) -> str:
    scheme = path.split("://", 1)[0].lower() if "://" in path else ""
    if scheme not in _LOCAL_SCHEMES:
        if scheme == "v3io":
            raise OutOfScopeError(
                f"{field_name}: the v3io:// data store",
                "V3IO is read through its mount: fn.apply(runplane.mount_v3io(...)) and pass "
                "the mounted path (example: '/v3io/projects/my-project/data.csv')",
            )
        raise OutOfScopeError(
            f"{field_name}: the {scheme}:// data store",
            f"runplane reads local files and mounted volumes; {path!r} cannot be read. Copy "
            "the data to a mounted volume (mount_pvc, mount_v3io) and pass its path",
        )
    if scheme == "file":
        path = path[len("file://") :]
    return path if os.path.isabs(path) else str(Path(path).resolve())

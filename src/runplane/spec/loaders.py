"""Making functions: from arguments, from a Python file, from an exported YAML.

This is the only module of ``spec`` that reads files, and only files the caller names.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runplane import hooks
from runplane.errors import InvalidValueError, NotFoundError
from runplane.spec import mlrun_layout
from runplane.spec.annotations import definitions, has_markers, kept_cells, select_code
from runplane.spec.function import BuildSpec, Function, FunctionSpec, Metadata, check_kind
from runplane.spec.handler import defined_functions, read_signature


def new_function(
    name: str = "",
    project: str = "",
    tag: str = "",
    kind: str = "job",
    command: str = "",
    image: str = "",
    args: list[str] | None = None,
    runtime: Mapping[str, Any] | Function | None = None,
    mode: str | None = None,
    handler: str = "",
    source: str = "",
    requirements: list[str] | str | None = None,
    kfp: object = None,
    requirements_file: str = "",
    description: str = "",
    labels: dict[str, str] | None = None,
) -> Function:
    """A function from arguments; ``command`` is a file run where the function runs.

    ``runtime`` is a whole function to start from: a :class:`Function` (copied) or MLRun's
    dict form (``to_dict()`` of an MLRun function), whose layout its ``to_dict()`` keeps;
    the arguments given change it.

    Without a name (and no command to name it after) the function is named when it runs,
    after its handler (``new_function().run(handler=train)`` runs ``train``).
    """
    if runtime is not None:
        return _from_runtime(
            runtime,
            name=name,
            project=project,
            tag=tag,
            command=command,
            image=image,
            handler=handler,
            args=args,
        )
    if not name and command:
        name = _name_from_path(command)
    if command and not Path(command).suffix and " " in command:
        command, *extra = command.split()
        args = [*extra, *(args or [])]
    function = Function(
        kind=check_kind(kind),
        metadata=Metadata(name=name, project=project or "default", tag=tag, labels=labels or {}),
        spec=FunctionSpec(
            command=command, image=image, handler=handler, args=args or [], description=description
        ),
    )
    if source:
        function.with_source_archive(source)
    if requirements or requirements_file:
        function.with_requirements(requirements, requirements_file)
    return function


def _from_runtime(runtime: Mapping[str, Any] | Function, **given: Any) -> Function:
    """``new_function(runtime=...)``: the runtime's function, with the default image pull
    secret ``mlconf`` was given filled in as MLRun fills it, then the arguments given. The
    resources it leaves out are completed when it renders, from runplane's function defaults,
    so a default nothing uses is never checked."""
    if isinstance(runtime, Function):
        function = Function.from_dict(runtime.to_dict())
    else:
        ours, layout = mlrun_layout.read(runtime)
        defaults = hooks.client().mlrun_defaults()
        spec = ours["spec"]
        if defaults["image_pull_secret"] and not spec.get("image_pull_secret"):
            spec["image_pull_secret"] = defaults["image_pull_secret"]
            layout.setdefault("spec", {}).setdefault("image_pull_secret", None)
        function = Function.from_dict(ours).keep_layout(layout)
    metadata = {key: given.pop(key) for key in ("name", "project", "tag")}
    metadata = {key: value for key, value in metadata.items() if value}
    if metadata:
        function._replace_metadata(**metadata)
    changes = {k: v for k, v in given.items() if v}
    return function._replace("spec", **changes) if changes else function


def code_to_function(
    name: str = "",
    project: str = "",
    tag: str = "",
    filename: str = "",
    handler: str = "",
    kind: str = "job",
    image: str = "",
    code_output: str = "",
    embed_code: bool = True,
    description: str = "",
    requirements: list[str] | str | None = None,
    categories: list[str] | None = None,
    labels: dict[str, str] | None = None,
    with_doc: bool = True,
    ignored_tags: str | None = None,
    requirements_file: str = "",
) -> Function:
    """A function whose code is a Python file or notebook, embedded so it runs anywhere.

    Without ``filename`` the code is the running script's or notebook's own, as the
    documents' examples (written in a notebook) expect of "the current code": its
    ``# mlrun: start-code``/``end-code`` sections when it has them, else its definitions
    (imports, functions, classes, constants), so the run does not run the script's own
    top-level statements (the ``fn.run()`` call among them) again. A named file is embedded
    whole, less the parts its annotations leave out. ``code_output`` is a directory to write
    the embedded code to, as a ``.py`` file.
    """
    if filename:
        path = Path(filename)
        if not path.is_file():
            raise NotFoundError(f"filename: {filename!r} does not exist")
        if path.suffix == ".ipynb":
            code = select_code(_notebook_code(path), name)
        else:
            code = read_text("filename", path)
            code = select_code(code, name) if has_markers(code) else code
    else:
        code, path = _current_code(name)
        filename = str(path)
    if handler:
        read_signature(code, handler, path.name)
    else:
        defined_functions(code, path.name)
    function = new_function(
        name=name or _name_from_path(filename),
        project=project,
        tag=tag,
        kind=kind,
        image=image,
        handler=handler,
        description=description,
        labels=labels,
        requirements=requirements,
        requirements_file=requirements_file,
    )
    if code_output:
        target = Path(code_output) / f"{path.stem}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code, encoding="utf-8")
    if embed_code:
        function.spec.build = BuildSpec(
            source=base64.b64encode(code.encode()).decode(), filename=f"{path.stem}.py"
        )
    else:
        function.spec.command = str(path)
    return function


def embed_command(function: Function) -> Function:
    """``function`` with the code of its ``spec.command`` file embedded, when that file is on
    this machine and nothing is embedded yet (the caller's side of a run: ``fn.run()`` and
    ``runplane run``); otherwise ``function`` itself."""
    command = function.spec.command
    if function.spec.build.source or not command or not Path(command).is_file():
        return function
    path = Path(command)
    embedded = function.model_copy(deep=True)
    embedded.spec.build = BuildSpec(
        source=base64.b64encode(read_text("spec.command", path).encode()).decode(),
        filename=path.name,
    )
    return embedded


def import_function(url: str) -> Function:
    """A function from an exported YAML (or JSON) file."""
    import yaml

    if "://" in url:
        raise NotFoundError(
            f"url: {url!r} - runplane imports functions from local files; the function hub is "
            "not available (example: import_function('function.yaml'))"
        )
    path = Path(url)
    if not path.is_file():
        raise NotFoundError(
            f"url: {url!r} does not exist (example: import_function('function.yaml'))"
        )
    try:
        data: Any = yaml.safe_load(read_text("url", path))
    except yaml.YAMLError as error:
        raise InvalidValueError("url", url, f"the file must be YAML or JSON ({error})") from None
    if not isinstance(data, dict):
        raise InvalidValueError("url", url, "the file must hold one function (a mapping)")
    return Function.from_dict(data)


def _current_code(name: str) -> tuple[str, Path]:
    """The running script's or notebook's code for a function named ``name``."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if script and str(script).endswith(".py") and Path(script).is_file():
        source, path = Path(script).read_text(encoding="utf-8"), Path(script)
    else:
        cells = kept_cells(notebook_cells())
        if not cells:
            raise InvalidValueError(
                "filename",
                "",
                "code_to_function needs the .py or .ipynb file when it is not called from a "
                "script or notebook",
                "code_to_function('training', filename='train.py')",
            )
        source, path = "\n\n".join(cells) + "\n", Path(f"{name or 'notebook'}.py")
    return (select_code(source, name) if has_markers(source) else definitions(source)), path


def notebook_cells() -> list[str]:
    """The cells run so far in this IPython session, without magics and shell escapes."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    history = getattr(shell, "user_ns", {}).get("In", []) if shell is not None else []
    cells = []
    for cell in history:
        lines = [line for line in str(cell).splitlines() if not line.lstrip().startswith("%")]
        lines = [line for line in lines if not line.lstrip().startswith("!")]
        if "get_ipython()" not in "\n".join(lines) and any(line.strip() for line in lines):
            cells.append("\n".join(lines))
    return cells


def _notebook_code(path: Path) -> str:
    """The code cells of a notebook, without IPython magics and shell escapes."""
    try:
        cells = json.loads(read_text("filename", path))["cells"]
    except (ValueError, KeyError, TypeError):
        raise InvalidValueError(
            "filename", str(path), "a .ipynb file must be a Jupyter notebook"
        ) from None
    blocks = []
    sources = ["".join(cell.get("source", [])) for cell in cells if cell.get("cell_type") == "code"]
    for source in kept_cells(sources):
        kept = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
        if any(line.strip() for line in kept):
            blocks.append("\n".join(kept).rstrip("\n"))
    return "\n\n".join(blocks) + "\n"


def read_text(field: str, path: Path) -> str:
    """A file the user named (code, a notebook, an exported function): UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise InvalidValueError(
            field,
            str(path),
            f"the file must be UTF-8 text (byte {error.start} is not); save it as UTF-8",
            "python -c \"import pathlib; p = pathlib.Path('train.py'); "
            "p.write_text(p.read_text('latin-1'), 'utf-8')\"",
        ) from None


def _name_from_path(path: str) -> str:
    return Path(path).stem.lower().replace("_", "-")

"""Projects: containers of functions, parameters, secrets and runs, kept in a directory's
``project.yaml`` (see :mod:`runplane.projects.project`).

The project most recently created or loaded in this process is the *current* one:
``run_function("train")`` runs its function ``train``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from runplane.errors import InvalidValueError, NotFoundError, OutOfScopeError
from runplane.projects.project import (
    PROJECT_FILE,
    BuildStatus,
    DeployStatus,
    Project,
    user_project_name,
)
from runplane.spec.function import Function

#: MLRun's name of the project class.
MlrunProject = Project

__all__ = [
    "BuildStatus",
    "DeployStatus",
    "MlrunProject",
    "Project",
    "build_function",
    "deploy_function",
    "get_current_project",
    "get_or_create_project",
    "load_project",
    "new_project",
    "run_function",
]

_current: Project | None = None


def _made_current(project: Project) -> Project:
    global _current
    _current = project
    return project


def new_project(
    name: str,
    context: str = "./",
    init_git: bool = False,
    user_project: bool = False,
    remote: str | None = None,
    from_template: str | None = None,
    secrets: Mapping[str, str] | None = None,
    description: str | None = None,
    subpath: str | None = None,
    save: bool = True,
    overwrite: bool = False,
    parameters: Mapping[str, Any] | None = None,
    default_function_node_selector: Mapping[str, str] | None = None,
) -> Project:
    """A new project named ``name`` (``name-<user>`` with ``user_project``) in the directory
    ``context``, saved there as ``project.yaml`` unless ``save=False``."""
    if from_template:
        raise OutOfScopeError(
            "project templates (from_template=)", "copy the template's files into the context"
        )
    if init_git or remote:
        _git_out_of_scope("init_git/remote")
    project = Project(
        user_project_name(name) if user_project else name,
        Path(context or "./") / (subpath or ""),
        description or "",
    )
    project.spec.params.update(dict(parameters or {}))
    project.default_function_node_selector = default_function_node_selector
    if secrets:
        project.set_secrets(secrets)
    if save:
        project.save()
    return _made_current(project)


def load_project(
    context: str = "./",
    url: str | None = None,
    name: str | None = None,
    secrets: Mapping[str, str] | None = None,
    init_git: bool = False,
    subpath: str | None = None,
    clone: bool = False,
    user_project: bool = False,
    save: bool = True,
    sync_functions: bool = False,
    parameters: Mapping[str, Any] | None = None,
    allow_cross_project: bool | None = None,
) -> Project:
    """The project of ``context``'s ``project.yaml`` (or of ``url``, a local project file or
    directory)."""
    source = Path(url) if url else Path(context or "./") / (subpath or "")
    if url and "://" in url:
        _git_out_of_scope(url)
    path = source if source.suffix in (".yaml", ".yml") else source / PROJECT_FILE
    if not path.is_file():
        raise NotFoundError(
            f"project file {str(path)!r} does not exist (new_project or "
            "get_or_create_project creates one)"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise InvalidValueError(str(path), None, f"a project file is YAML ({error})") from None
    project = Project.from_dict(data, context if url else path.parent)
    if name and name != project.name:
        renamed = user_project_name(name) if user_project else name
        project.metadata.name = renamed
    elif user_project:
        project.metadata.name = user_project_name(project.name)
    project.spec.params.update(dict(parameters or {}))
    if secrets:
        project.set_secrets(secrets)
    if sync_functions:
        for function_name in project.function_names:
            project.get_function(function_name, ignore_cache=True)
    return _made_current(project)


def get_or_create_project(
    name: str,
    context: str = "./",
    url: str | None = None,
    secrets: Mapping[str, str] | None = None,
    init_git: bool = False,
    subpath: str | None = None,
    clone: bool = False,
    user_project: bool = False,
    from_template: str | None = None,
    save: bool = True,
    parameters: Mapping[str, Any] | None = None,
    allow_cross_project: bool | None = None,
) -> Project:
    """The project ``name`` of ``context`` when its ``project.yaml`` is that project, else a
    new one there."""
    wanted = user_project_name(name) if user_project else name
    path = Path(url) if url else Path(context or "./") / (subpath or "") / PROJECT_FILE
    if path.is_file():
        project = load_project(context, url, secrets=secrets, subpath=subpath, save=save)
        if project.name == wanted:
            project.spec.params.update(dict(parameters or {}))
            if save:
                project.store_record(update=False)
            return project
        if not allow_cross_project:
            raise InvalidValueError(
                "name",
                wanted,
                f"{str(path)!r} is project {project.name!r}; give that name, another "
                "context, or allow_cross_project=True to make a new project there",
                f"get_or_create_project({project.name!r}, context={context!r})",
            )
    if save:  # a project recorded where runs go, without a file here: begin from its record
        from runplane.client import projects as records

        record = records.get(wanted)
        if record is not None and record.get("recorded"):
            project = Project.from_record(record, Path(context or "./") / (subpath or ""))
            project.spec.params.update(dict(parameters or {}))
            if secrets:
                project.set_secrets(secrets)
            project.save()
            return _made_current(project)
    return new_project(
        name,
        context,
        init_git=init_git,
        user_project=user_project,
        from_template=from_template,
        secrets=secrets,
        subpath=subpath,
        save=save,
        parameters=parameters,
    )


def get_current_project(silent: bool = False) -> Project | None:
    """The project most recently created or loaded in this process."""
    if _current is None and not silent:
        raise NotFoundError(
            "no current project: get_or_create_project('my-project') creates or loads one"
        )
    return _current


def _project_of(project_object: Project | None) -> Project:
    project = project_object or get_current_project()
    assert project is not None
    return project


def run_function(
    function: str | Function,
    handler: Any = None,
    name: str = "",
    params: Mapping[str, Any] | None = None,
    hyperparams: Mapping[str, Any] | None = None,
    hyper_param_options: Any = None,
    inputs: Mapping[str, Any] | None = None,
    outputs: list[str] | None = None,
    workdir: str = "",
    labels: Mapping[str, str] | None = None,
    base_task: Any = None,
    watch: bool = True,
    local: bool | None = None,
    verbose: bool | None = None,
    selector: str | None = None,
    project_object: Project | None = None,
    auto_build: bool | None = None,
    schedule: str | None = None,
    artifact_path: str | None = None,
    notifications: Any = None,
    returns: list[str] | None = None,
    builder_env: Mapping[str, str] | None = None,
    reset_on_run: bool | None = None,
    retry: Any = None,
) -> Any:
    """Run a function: by name, one of the current project's; a function object, in the
    current project when there is one, else as it is."""
    project = project_object or get_current_project(silent=True)
    if project is None:
        if isinstance(function, str):
            raise NotFoundError(
                f"function {function!r}: there is no current project to find it in "
                "(get_or_create_project first, or pass the function object)"
            )
        return function.run(
            base_task,
            handler=handler,
            name=name,
            params=params,
            inputs=inputs,
            workdir=workdir,
            artifact_path=artifact_path,
            watch=watch,
            schedule=schedule,
            hyperparams=hyperparams,
            hyper_param_options=hyper_param_options,
            local=local,
            returns=returns,
            labels=labels,
            selector=selector,
            retry=retry,
        )
    return project.run_function(
        function,
        handler=handler,
        name=name,
        params=params,
        hyperparams=hyperparams,
        hyper_param_options=hyper_param_options,
        inputs=inputs,
        workdir=workdir,
        labels=labels,
        base_task=base_task,
        watch=watch,
        local=local,
        selector=selector,
        schedule=schedule,
        artifact_path=artifact_path,
        returns=returns,
        retry=retry,
    )


def build_function(
    function: str | Function, project_object: Project | None = None, **options: Any
) -> BuildStatus:
    return _project_of(project_object).build_function(function, **options)


def deploy_function(
    function: str | Function, project_object: Project | None = None, **options: Any
) -> DeployStatus:
    return _project_of(project_object).deploy_function(function, **options)


def _git_out_of_scope(what: str) -> None:
    raise OutOfScopeError(
        f"projects in git repositories and remote archives ({what})",
        "clone or unpack the project yourself and load_project('<its directory>')",
    )

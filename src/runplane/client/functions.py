"""Stored functions, where runs go (see :func:`runplane.client.backend`): the service's
catalog (``RUNPLANE_API``) or this machine's. ``fn.save()`` stores one;
``import_function("db://project/name")`` reads it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runplane.errors import InvalidValueError, OutOfScopeError
from runplane.spec import loaders
from runplane.spec.function import Function

if TYPE_CHECKING:
    from runplane.client import Backend


def save(fn: Function) -> str:
    """Store ``fn`` as a new version (the same content is one version); returns its URI."""
    if not fn.metadata.name:
        raise InvalidValueError(
            "metadata.name", "", "a stored function needs a name", "new_function('trainer')"
        )
    _backend().store_function(fn)
    uri = f"db://{fn.metadata.project}/{fn.metadata.name}"
    return uri + (f":{fn.metadata.tag}" if fn.metadata.tag else "")


def get_function(project: str, name: str, tag: str | None = None) -> Function:
    """The newest stored version of ``project/name`` (or the one tagged ``tag``)."""
    stored = _backend().get_function(project, name, tag or None)
    return Function.from_dict(stored["function"])


def list_functions(project: str) -> list[Function]:
    stored = _backend().list_functions(project)
    return [Function.from_dict(row["function"]) for row in stored]


def import_function(
    url: str,
    secrets: Any = None,
    db: str = "",
    project: str | None = None,
    new_name: str | None = None,
) -> Function:
    """A function from an exported YAML file, or stored (``db://project/name[:tag]``), named
    ``new_name`` in ``project`` when given."""
    if url.startswith("db://"):
        path, _, tag = url[len("db://") :].partition(":")
        project_name, _, name = path.rpartition("/")
        name, _, version = name.partition("@")
        fn = get_function(project_name or "default", name, tag or version or None)
    elif url.startswith("hub://"):
        raise OutOfScopeError(
            f"the MLRun function hub ({url})",
            "export the function to YAML (fn.export()) and import that file, or use "
            "code_to_function on its code",
        )
    else:
        fn = loaders.import_function(url)
    if new_name:
        fn.metadata.name = new_name
    if project:
        fn.metadata.project = project
    return fn


def _backend() -> Backend:
    from runplane.client import backend

    return backend()

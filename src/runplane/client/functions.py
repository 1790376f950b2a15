"""Stored functions, where runs go: the service's catalog (``RUNPLANE_API``) or this
machine's. ``fn.save()`` stores one; ``import_function("db://project/name")`` reads it back.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from runplane.errors import InvalidValueError, OutOfScopeError
from runplane.spec import loaders
from runplane.spec.function import Function


def _stored(record: Any) -> dict[str, Any]:
    return record if isinstance(record, dict) else asdict(record)


def save(fn: Function) -> str:
    """Store ``fn`` as a new version (the same content is one version); returns its URI."""
    if not fn.metadata.name:
        raise InvalidValueError(
            "metadata.name", "", "a stored function needs a name", "new_function('trainer')"
        )
    service = _backend()
    catalog = getattr(service, "catalog", None)
    if catalog is not None:
        catalog.store(fn, getattr(service, "default_owner", ""))
    else:
        service.store_function(fn)
    uri = f"db://{fn.metadata.project}/{fn.metadata.name}"
    return uri + (f":{fn.metadata.tag}" if fn.metadata.tag else "")


def get_function(project: str, name: str, tag: str | None = None) -> Function:
    """The newest stored version of ``project/name`` (or the one tagged ``tag``)."""
    service = _backend()
    catalog = getattr(service, "catalog", None)
    if catalog is not None:
        stored = _stored(catalog.get(project, name, tag or None))
    else:
        stored = service.get_function(project, name, tag or None)
    return Function.from_dict(stored["function"])


def list_functions(project: str) -> list[Function]:
    service = _backend()
    catalog = getattr(service, "catalog", None)
    rows = catalog.latest(project) if catalog is not None else service.list_functions(project)
    return [Function.from_dict(_stored(row)["function"]) for row in rows]


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


def _backend() -> Any:
    from runplane.client import backend

    return backend()

"""Project records, where runs go: the service's (``RUNPLANE_API``) or this machine's store.

``new_project``, ``get_or_create_project`` and ``project.save()`` keep a project's record
(description, parameters, default image, labels) there; ``get_run_db().list_projects()`` and
``get_project()`` read it back. A record belongs to whoever made it: saving another user's
project leaves its record as it is, with a warning, and its ``project.yaml`` is still written.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from runplane.errors import InvalidValueError, PolicyError


def _backend() -> Any:
    from runplane.client import backend

    return backend()


def _dict(record: Any) -> dict[str, Any]:
    return dict(record) if isinstance(record, Mapping) else asdict(record)


def record_values(
    description: str, params: Mapping[str, Any], default_image: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """What a project's record keeps; parameters as JSON has them (what its runs receive)."""
    return {
        "description": description,
        "params": json.loads(json.dumps(dict(params), default=str)),
        "default_image": default_image,
        "labels": dict(labels),
    }


def store(name: str, values: Mapping[str, Any], update: bool = True) -> dict[str, Any]:
    """The record of ``name``, made with ``values`` when there is none; with ``update`` a
    record of the caller's own takes ``values`` where they differ."""
    service = _backend()
    if hasattr(service, "create_project"):  # the service
        record = dict(service.create_project(name, dict(values)))
    else:
        made, _ = service.projects.create(name, getattr(service, "default_owner", ""), values)
        record = _dict(made)
    changed = {key: value for key, value in values.items() if record.get(key) != value}
    if not update or not changed:
        return record
    try:
        if hasattr(service, "update_project"):
            return dict(service.update_project(name, changed))
        owner = getattr(service, "default_owner", "")
        return _dict(service.projects.update(name, changed, owner, admin=True))
    except PolicyError as error:
        warnings.warn(f"{error}; its record was not changed", stacklevel=3)
    except Exception as error:
        if getattr(error, "http_status", None) != 403:
            raise
        warnings.warn(f"{error}; its record was not changed", stacklevel=3)
    return record


def get(name: str) -> dict[str, Any] | None:
    """The record of ``name``; ``None`` when the project has none (not even runs)."""
    from runplane.errors import NotFoundError

    service = _backend()
    try:
        if hasattr(service, "get_project"):
            return dict(service.get_project(name))
        found: dict[str, Any] = _dict(service.projects.get(name))
        return found
    except NotFoundError:
        return None
    except Exception as error:
        if getattr(error, "http_status", None) == 404:
            return None
        raise


def list_records() -> list[dict[str, Any]]:
    service = _backend()
    if hasattr(service, "list_projects"):
        return [dict(record) for record in service.list_projects()]
    return [_dict(record) for record in service.projects.list_projects()]


def delete(name: str, deletion_strategy: str = "restricted") -> None:
    from runplane.service.projects import DeletionStrategy

    given = str(getattr(deletion_strategy, "value", deletion_strategy))
    if given not in {strategy.value for strategy in DeletionStrategy}:
        raise InvalidValueError(
            "deletion_strategy",
            deletion_strategy,
            "restricted (refused while the project has runs, functions or schedules) or "
            "cascading (its functions and schedules go with it; its runs' records stay)",
            "deletion_strategy='cascading'",
        )
    strategy = DeletionStrategy(given)
    service = _backend()
    if hasattr(service, "delete_project"):
        service.delete_project(name, strategy.value)
    else:
        owner = getattr(service, "default_owner", "")
        service.projects.delete(name, owner, admin=True, strategy=strategy)

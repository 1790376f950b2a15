"""Project records, where runs go (see :func:`runplane.client.backend`): the service's
(``RUNPLANE_API``) or this machine's store.

``new_project``, ``get_or_create_project`` and ``project.save()`` keep a project's record
(description, parameters, default image, labels, retention policy) there;
``get_run_db().list_projects()`` and ``get_project()`` read it back. A record belongs to
whoever made it: saving another user's project leaves its record as it is, with a warning,
and its ``project.yaml`` is still written.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from runplane.errors import InvalidValueError, PolicyError

if TYPE_CHECKING:
    from runplane.client import Backend


def _backend() -> Backend:
    from runplane.client import backend

    return backend()


def record_values(
    description: str,
    params: Mapping[str, Any],
    default_image: str,
    labels: Mapping[str, str],
    retention: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a project's record keeps; parameters as JSON has them (what its runs receive).
    A retention policy only when the project sets one: a ``project.yaml`` without one leaves
    the record's (an admin may have set it through the API) as it is."""
    values = {
        "description": description,
        "params": json.loads(json.dumps(dict(params), default=str)),
        "default_image": default_image,
        "labels": dict(labels),
    }
    if retention:
        values["retention"] = dict(retention)
    return values


def store(name: str, values: Mapping[str, Any], update: bool = True) -> dict[str, Any]:
    """The record of ``name``, made with ``values`` when there is none; with ``update`` a
    record of the caller's own takes ``values`` where they differ."""
    service = _backend()
    record = service.create_project(name, dict(values))
    changed = {key: value for key, value in values.items() if record.get(key) != value}
    if not update or not changed:
        return record
    try:
        return service.update_project(name, changed)
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

    try:
        return _backend().get_project(name)
    except NotFoundError:
        return None
    except Exception as error:
        if getattr(error, "http_status", None) == 404:
            return None
        raise


def list_records() -> list[dict[str, Any]]:
    return _backend().list_projects()


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
    _backend().delete_project(name, given)

"""The embedded default: the run service in this process, running functions on this machine.

On start it finishes the runs of executors that died (``executor lost``); each process has one
service per runplane home, closed at exit (its remaining runs are aborted, saying why).
"""

from __future__ import annotations

import atexit
import getpass
import threading
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from runplane.config import Settings
from runplane.runs import ResizeRecord
from runplane.runtimes.contract import Answer, Call
from runplane.runtimes.local.runtime import LocalRuntime
from runplane.service.catalog import FunctionCatalog
from runplane.service.core import RunService
from runplane.service.db import connect, sqlite_url
from runplane.service.deployments import (
    apply_deployment,
    check_deployable,
    get_deployment,
    list_deployments,
)
from runplane.service.nodes import label_node, node_views
from runplane.service.projects import DeletionStrategy, ProjectStore
from runplane.service.quotas import project_usage
from runplane.service.records import RunStore
from runplane.spec.function import Function


class EmbeddedService(RunService):
    def __init__(self, settings: Settings) -> None:
        engine = connect(sqlite_url(settings.local.home / "runplane.db"))
        super().__init__(settings, RunStore(engine), LocalRuntime(settings))
        self.default_owner = getpass.getuser()
        #: Functions stored with ``fn.save()`` on this machine.
        self.catalog = FunctionCatalog(engine)
        #: Projects recorded with ``new_project``/``project.save()`` on this machine.
        self.projects = ProjectStore(engine)

    # Stored functions, as ``runplane serve`` offers them, this machine's user's.

    def store_function(self, fn: Function) -> dict[str, Any]:
        return asdict(self.catalog.store(fn, self.default_owner))

    def get_function(self, project: str, name: str, version: str | None = None) -> dict[str, Any]:
        return asdict(self.catalog.get(project, name, version))

    def list_functions(self, project: str) -> list[dict[str, Any]]:
        return [asdict(stored) for stored in self.catalog.latest(project)]

    # Project records, as ``runplane serve`` offers them; this machine's user may change any.

    def create_project(self, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """Get-or-create: the existing record when there is one."""
        made, _ = self.projects.create(name, self.default_owner, values, admin=True)
        return asdict(made)

    def update_project(self, name: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return asdict(self.projects.update(name, values, self.default_owner, admin=True))

    def get_project(self, name: str) -> dict[str, Any]:
        return asdict(self.projects.get(name))

    def list_projects(self) -> list[dict[str, Any]]:
        return [asdict(record) for record in self.projects.list_projects()]

    def delete_project(self, name: str, deletion_strategy: str = "restricted") -> None:
        strategy = DeletionStrategy(deletion_strategy)
        self.projects.delete(name, self.default_owner, admin=True, strategy=strategy)
        self.quotas.forget(name)

    # Project quotas, as ``runplane serve`` offers them; this machine's user is their admin.

    def project_quotas(self, name: str) -> dict[str, Any]:
        return project_usage(self.quotas, self.store, name)

    def set_project_quota(
        self, name: str, flavor: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        user = self.default_owner
        self.quotas.set_flavor(name, flavor, values, user, True, self.projects.names)
        return self.project_quotas(name)

    def clear_project_quota(self, name: str, flavor: str | None = None) -> dict[str, Any]:
        self.quotas.clear(name, flavor, self.default_owner, admin=True)
        return self.project_quotas(name)

    def resize(self, uid: str, mem: Any = None, cpu: Any = None, by: str = "") -> ResizeRecord:
        """Resize a running run in place, as this machine's user."""
        return super().resize(uid, mem, cpu, by or self.default_owner)

    # Serving deployments and node labels, as ``runplane serve`` offers them: here every
    # deployment is this machine's user's, so none is checked for an owner.

    def deploy(self, fn: Function) -> dict[str, Any]:
        """Start ``fn``'s replicas on this machine and wait until they answer."""
        check_deployable(self.runtime, fn)
        applied = apply_deployment(self.runtime, self.settings, fn)
        url = get_deployment(self.runtime, fn.metadata.project, fn.metadata.name)["url"]
        return {"namespace": "local", "applied": applied, "url": url}

    def deployments(self, project: str | None = None) -> list[dict[str, Any]]:
        return list_deployments(self.runtime, project)

    def deployment(self, project: str, name: str) -> dict[str, Any]:
        return get_deployment(self.runtime, project, name)

    def delete_deployment(self, project: str, name: str) -> str:
        get_deployment(self.runtime, project, name)
        return self.runtime.delete_deployment(project, name)

    def invoke(self, project: str, name: str, call: Call) -> Answer:
        return self.runtime.invoke(project, name, call)

    def label_node(self, name: str, labels: Mapping[str, str | None]) -> dict[str, str]:
        return label_node(self.runtime, name, labels)

    def nodes(self) -> list[dict[str, Any]]:
        """This machine as a node, as ``GET /cluster/nodes`` shows nodes."""
        return [view.model_dump() for view in node_views(self.runtime.nodes(), self.settings.spot)]


_services: dict[Path, EmbeddedService] = {}
_services_lock = threading.Lock()


def embedded(settings: Settings) -> EmbeddedService:
    """The process's embedded service for the runplane home of ``settings``."""
    home = settings.local.home
    with _services_lock:
        service = _services.get(home)
        if service is None:
            service = _services[home] = EmbeddedService(settings).start()
        return service


@atexit.register
def close_all() -> None:
    """Close the process's embedded services (their remaining runs are aborted, saying why):
    at exit, or sooner by a program done with runplane (a test with a runplane home of its
    own), whose services would otherwise go on watching for work until then."""
    with _services_lock:
        services = list(_services.values())
        _services.clear()
    for service in services:
        service.close()

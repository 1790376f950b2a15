"""The embedded default: the run service in this process, running functions on this machine.

On start it finishes the runs of executors that died (``executor lost``); each process has one
service per runplane home, closed at exit (its remaining runs are aborted, saying why).
"""

from __future__ import annotations

import atexit
import getpass
import threading
from pathlib import Path

from runplane.config import Settings
from runplane.runtimes.local.runtime import LocalRuntime
from runplane.service.catalog import FunctionCatalog
from runplane.service.core import RunService
from runplane.service.db import connect, sqlite_url
from runplane.service.projects import ProjectStore
from runplane.service.records import RunStore


class EmbeddedService(RunService):
    def __init__(self, settings: Settings) -> None:
        engine = connect(sqlite_url(settings.local.home / "runplane.db"))
        super().__init__(settings, RunStore(engine), LocalRuntime(settings))
        self.default_owner = getpass.getuser()
        #: Functions stored with ``fn.save()`` on this machine.
        self.catalog = FunctionCatalog(engine)
        #: Projects recorded with ``new_project``/``project.save()`` on this machine.
        self.projects = ProjectStore(engine)


_services: dict[Path, EmbeddedService] = {}
_services_lock = threading.Lock()


def embedded(settings: Settings) -> EmbeddedService:
    """The process's embedded service for the runplane home of ``settings``."""
    home = settings.local.home
    with _services_lock:
        service = _services.get(home)
        if service is None:
            service = _services[home] = EmbeddedService(settings)
            if len(_services) == 1:
                atexit.register(_close_all)
        return service


def _close_all() -> None:
    with _services_lock:
        services = list(_services.values())
        _services.clear()
    for service in services:
        service.close()

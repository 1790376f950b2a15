"""Everything ``runplane serve`` runs: the run service on its runtime, stored functions,
schedules, and service defaults, sharing one database."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from runplane.config import Settings
from runplane.runtimes.base import Runtime
from runplane.runtimes.events import Listener, RunEvent, RunState
from runplane.service.catalog import FunctionCatalog
from runplane.service.core import LIVE_STATES, THIS_PROCESS, RunService, process_alive
from runplane.service.db import connect, sqlite_url
from runplane.service.defaults import DefaultsStore, apply_overrides
from runplane.service.records import RunExistsError, RunStore
from runplane.service.schedules import ScheduleRecord, ScheduleStore
from runplane.spec.function import Function


@dataclass(frozen=True, slots=True)
class Reconciliation:
    resubmitted: list[str]
    lost: list[str]
    orphans: list[str]


def _runtime_factory(settings: Settings) -> tuple[Any, str]:
    if settings.service.runtime == "kubernetes":
        from runplane.runtimes.kubernetes import KubernetesRuntime

        service = settings.service

        def kubernetes(listener: Listener) -> Runtime:
            return KubernetesRuntime(
                settings,
                listener,
                kubeconfig=service.kubeconfig,
                context=service.kube_context,
                instance=service.instance,
            )

        return kubernetes, "kubernetes"
    from runplane.runtimes.local.runtime import LocalRuntime

    def local(listener: Listener) -> Runtime:
        return LocalRuntime(settings, listener)

    return local, "local"


class Server:
    def __init__(self, settings: Settings) -> None:
        url = settings.service.database_url or sqlite_url(settings.local.home / "runplane.db")
        engine = connect(url)
        self.catalog = FunctionCatalog(engine)
        self.schedules = ScheduleStore(engine)
        self.defaults = DefaultsStore(engine)
        self.base_settings = settings
        effective = apply_overrides(settings, self.defaults.overrides())
        store = RunStore(engine)
        factory, name = _runtime_factory(effective)
        executor = THIS_PROCESS if name == "local" else None
        if executor is not None:
            store.mark_lost(process_alive)
        self.runs = RunService(effective, store, factory, runtime_name=name, executor=executor)
        self.reconciliation = self.reconcile() if name == "kubernetes" else None
        self._stop = threading.Event()
        self._scheduler = threading.Thread(
            target=self._fire_schedules, daemon=True, name="runplane-schedules"
        )
        self._scheduler.start()

    def reconcile(self, sync_timeout: float = 60.0) -> Reconciliation:
        """Make the records and the cluster agree after a start (or a crash and restart).

        Pods that exist are reported by the watch's first list (a pod that finished while the
        service was down gets its final state then). Runs recorded but never submitted are
        submitted again (same pod name: never a second pod); runs whose pods are gone are
        finished as ``error``; pods labelled as runs but unknown here are reported, and
        deleted when ``service.orphan_pods`` says so.
        """
        runtime: Any = self.runs.runtime
        runtime.wait_synced(sync_timeout)
        pods = runtime.pods_by_run()
        resubmitted, lost = [], []
        for record in self.runs.store.list_runs(states=LIVE_STATES, limit=100_000):
            if record.runtime != "kubernetes" or record.uid in pods:
                continue
            if record.state == "created":
                self.runs.resubmit(record)
                resubmitted.append(record.uid)
            else:
                self.runs.store.apply(
                    RunEvent(
                        uid=record.uid,
                        state=RunState.ERROR,
                        reason="PodLost",
                        message="the run's pod no longer exists (deleted while the service was "
                        "down); how the run ended is unknown",
                    )
                )
                lost.append(record.uid)
        orphans = [uid for uid in pods if uid and not self.runs.store.exists(uid)]
        for uid in orphans:
            print(
                f"runplane: pod(s) of unknown run {uid}: "
                + ", ".join(p["metadata"]["name"] for p in pods[uid])
                + (" - deleting" if self.base_settings.service.orphan_pods == "delete" else ""),
                flush=True,
            )
            if self.base_settings.service.orphan_pods == "delete":
                runtime.abort(uid, "Orphan", "a pod of a run unknown to the service")
        return Reconciliation(resubmitted, lost, orphans)

    def deploy(self, fn: Function, role: str | None = None) -> list[str]:
        """Apply a serving function's Deployment, Service and autoscaler to the cluster."""
        from runplane.errors import InvalidValueError
        from runplane.render import render
        from runplane.spec.function import FunctionKind

        if fn.kind is not FunctionKind.SERVING:
            raise InvalidValueError(
                "kind",
                fn.kind.value,
                "only serving functions are deployed; jobs are run",
                "new_function('serve', kind='serving')",
            )
        if self.runs.runtime_name != "kubernetes":
            raise InvalidValueError(
                "service.runtime",
                self.runs.runtime_name,
                "serving functions are deployed to a Kubernetes cluster; start the service "
                "with service.runtime: kubernetes",
                "RUNPLANE_SERVICE__RUNTIME=kubernetes",
            )
        rendered = render(fn, self.settings, role=role)
        runtime: Any = self.runs.runtime
        return list(runtime.apply(rendered.manifests))

    def nodes(self) -> list[dict[str, Any]]:
        """Each node: its group, labels, taints, what it can hold and what is free on it."""
        if self.runs.runtime_name != "kubernetes":
            from runplane.runtimes.local.node import local_node

            node = local_node(self.settings)
            return [
                {
                    "name": node.name,
                    "group": "",
                    "labels": node.labels,
                    "taints": [],
                    "allocatable": node.allocatable,
                    "free": node.allocatable,
                }
            ]
        runtime: Any = self.runs.runtime
        return list(runtime.node_summary())

    @property
    def settings(self) -> Settings:
        return self.runs.settings

    def update_defaults(self, patch: dict[str, Any], user: str) -> Settings:
        """Merge ``patch`` into the stored overrides; applies to runs submitted from now on."""
        from runplane.service.defaults import _merge

        overrides = _merge(self.defaults.overrides(), patch)
        updated = apply_overrides(self.base_settings, overrides)  # validates before saving
        self.defaults.save(overrides, user)
        self.runs.settings = updated
        return updated

    def _fire(self, schedule: ScheduleRecord, uid: str) -> bool:
        try:
            self.runs.submit(
                Function.from_dict(schedule.function),
                params=schedule.params,
                state_thresholds=schedule.state_thresholds,
                role=schedule.role or None,
                uid=uid,
            )
        except RunExistsError:
            return False
        return True

    def _fire_schedules(self) -> None:
        interval = self.base_settings.service.schedule_interval
        while not self._stop.wait(interval):
            try:
                self.schedules.fire_due(time.time(), self._fire)
            except Exception as error:  # a bad schedule must not stop the others
                print(f"runplane: schedule error: {error}", flush=True)

    def close(self) -> None:
        self._stop.set()
        self.runs.close()

"""Everything ``runplane serve`` runs: the run service on its runtime, stored functions,
schedules, and service defaults, sharing one database."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from runplane.config import Settings
from runplane.errors import InvalidValueError, RunExistsError, RunplaneError
from runplane.placement import NodeSummary
from runplane.rendering import render
from runplane.runs import RunRecord
from runplane.runtimes.contract import Answer, Call
from runplane.runtimes.kubernetes.api.calls import ClusterError
from runplane.runtimes.registry import create_runtime
from runplane.runtimes.request import build_request
from runplane.service.access import check_owner
from runplane.service.auth import Principal, Tokens, check_secret_grant
from runplane.service.catalog import FunctionCatalog
from runplane.service.core import RunService
from runplane.service.db import connect, sqlite_url, unreachable
from runplane.service.defaults import DefaultsStore, apply_overrides, apply_policies, merge
from runplane.service.deployments import (
    apply_deployment,
    check_deployable,
    find_deployment,
    get_deployment,
    list_deployments,
)
from runplane.service.launcher import Reconciliation
from runplane.service.leadership import Leadership
from runplane.service.nodes import label_node
from runplane.service.preflight import Placement, check_placement, unchecked
from runplane.service.projects import ProjectStore
from runplane.service.records import RunStore
from runplane.service.retention import Retention, Swept
from runplane.service.schedules import ScheduleRecord, ScheduleStore, check_cron
from runplane.spec.bounds import check_unicode
from runplane.spec.function import Function
from runplane.spec.loaders import new_function
from runplane.spec.run_options import RunOptions
from runplane.spec.thresholds import check_thresholds

log = logging.getLogger(__name__)


class Server:
    def __init__(self, settings: Settings) -> None:
        url = settings.service.database_url or sqlite_url(settings.local.home / "runplane.db")
        engine = self._engine = connect(url)
        self._checking = threading.Lock()
        self.catalog = FunctionCatalog(engine)
        self.projects = ProjectStore(engine)
        self.schedules = ScheduleStore(engine)
        self.defaults = DefaultsStore(engine)
        self.base_settings = settings
        self.tokens = Tokens(settings.service.tokens)
        effective = apply_overrides(settings, self.defaults.overrides())
        try:
            effective = apply_policies(effective, settings, self.defaults.policies())
        except RunplaneError as error:  # the configuration changed under the stored policies
            log.warning(
                "the policies an admin saved no longer fit the configuration (%s); the "
                "configured ones apply until an admin saves them again",
                error,
            )
        runtime = create_runtime(effective, serving=True)
        self.runs = RunService(effective, RunStore(engine), runtime, service=True)
        self._stop = threading.Event()
        #: Set while this process controls: always, alone; while it holds the Lease, as one
        #: of several replicas. Schedules fire and retention sweeps only then.
        self.leading = threading.Event()
        #: Whether this replica lost the lead (it then serves clients until it stops), and
        #: what is told when it does (``runplane serve`` stops, to start again as a follower).
        self.deposed = False
        self.on_deposed: Callable[[], None] = lambda: None
        self.leadership: Leadership | None = None
        if settings.service.leader_election.enabled:
            self.runs.follow()
            self.leadership = Leadership(settings, self._lead, self._depose)
            self.leadership.start()
        else:
            self.runs.start()
            self.leading.set()
        self._scheduler = threading.Thread(
            target=self._fire_schedules, daemon=True, name="runplane-schedules"
        )
        self._scheduler.start()
        self.retention = Retention(engine, settings.local.home / "runs", settings.retention.batch)
        #: What retention reads the time from (tests set one).
        self.clock: Callable[[], float] = time.time
        self._retention_due = threading.Event()
        self._retainer = threading.Thread(
            target=self._retain, daemon=True, name="runplane-retention"
        )
        self._retainer.start()

    @property
    def settings(self) -> Settings:
        return self.runs.settings

    @property
    def role(self) -> str:
        """``leader`` or ``follower`` among replicas (``leader`` alone)."""
        return "leader" if self.leading.is_set() else "follower"

    def _lead(self) -> None:
        """This replica holds the Lease: settle what the last leader left, as a restart does,
        then control (watch, launch, abort, thresholds, schedules, retention)."""
        self.runs.start()
        found = self.reconciliation
        log.info(
            "leading: %d run(s) launched again, %d lost, %d unknown run(s) had objects",
            len(found.resubmitted),
            len(found.lost),
            len(found.orphans),
        )
        self.leading.set()

    def _depose(self) -> None:
        """The Lease was lost: stop controlling at once, then say so."""
        self.leading.clear()
        self.deposed = True
        self.runs.step_down()
        log.error("this replica lost the lead and stopped controlling; it stops to start again")
        self.on_deposed()

    @property
    def reconciliation(self) -> Reconciliation:
        """What the start found (see :meth:`RunService._reconcile`)."""
        return self.runs.reconciliation

    def submit(
        self,
        fn: Function,
        who: Principal,
        options: RunOptions | None = None,
        recorded: bytes | None = None,
    ) -> RunRecord:
        """Run ``fn`` for ``who``: only with the Secrets their token grants, as their run
        (``recorded``: see :meth:`RunService.submit`)."""
        check_secret_grant(fn, who)
        return self.runs.submit(fn, options, role=who.role, owner=who.user, recorded=recorded)

    def deploy(self, fn: Function, who: Principal) -> list[str]:
        """Apply a serving function's Deployment, Service and autoscaler, with only the
        Secrets ``who``'s token grants."""
        check_secret_grant(fn, who)
        runtime = self.runs.runtime
        check_deployable(runtime, fn)
        found = find_deployment(runtime, fn.metadata.project, fn.metadata.name)
        if found is not None:  # deploying again replaces it: only its owner (or an admin)
            check_owner(who, found["owner"], f"deployment {fn.metadata.project}/{fn.metadata.name}")
        return apply_deployment(runtime, self.settings, fn, who.role, deployed_by=who.user)

    def deployments(self, who: Principal, project: str | None = None) -> list[dict[str, Any]]:
        """Serving deployments: a user's own, or everyone's for an admin."""
        owner = None if who.admin else who.user
        return list_deployments(self.runs.runtime, project, owner)

    def deployment(self, project: str, name: str, who: Principal) -> dict[str, Any]:
        """One deployment, if ``who`` may see it (its deployer, or an admin)."""
        found = get_deployment(self.runs.runtime, project, name)
        check_owner(who, found["owner"], f"deployment {project}/{name}")
        return found

    def delete_deployment(self, project: str, name: str, who: Principal) -> str:
        self.deployment(project, name, who)
        return self.runs.runtime.delete_deployment(project, name)

    def invoke(self, project: str, name: str, call: Call, who: Principal) -> Answer:
        """Send ``call`` to a deployment ``who`` may use; the function's answer as it is."""
        self.deployment(project, name, who)
        return self.runs.runtime.invoke(project, name, call)

    def nodes(self) -> list[NodeSummary]:
        """Each node: its group, labels, taints, what it can hold and what is free on it."""
        return self.runs.runtime.nodes()

    def schedule(
        self, fn: Function, cron: str, options: RunOptions, who: Principal
    ) -> ScheduleRecord:
        """ "Schedule for later": store a cron schedule of ``fn``, refusing now what would fail
        at every fire (the cron, Secrets not granted, policies, code, parameters, thresholds).
        Each run it fires gets ``options``' parameters and thresholds; a schedule keeps no
        inputs.
        """
        check_cron(cron)
        check_secret_grant(fn, who)
        build_request(fn, self.settings, uid="0" * 32, params=options.params, role=who.role)
        check_thresholds("state_thresholds", options.state_thresholds)
        return self.schedules.create(
            project=fn.metadata.project,
            name=fn.metadata.name,
            cron=cron,
            function=check_unicode("function", fn.to_dict()),
            params=options.params,
            state_thresholds=options.state_thresholds,
            user=who.user,
            role=who.role,
        )

    def placement(self, fn: Function, role: str | None = None) -> Placement:
        """Where ``fn`` could run on this runtime's nodes, and why not elsewhere (before it is
        submitted). Nodes the cluster does not let this service read (a chart installed
        without ``rbac.nodes.enabled``), or does not list now, leave it unchecked, saying why:
        the scheduler still places the run, so that is no reason to refuse it."""
        pod_spec = render(fn, self.settings, role=role).pod_spec
        try:
            nodes = self.nodes()
        except ClusterError as error:
            if error.status == 403:
                return unchecked(
                    "this service may not read the cluster's nodes (no rights to list them: "
                    "an admin grants them with the chart's rbac.nodes.enabled); the scheduler "
                    f"places the run, or it waits pending. The cluster said: {error}"
                )
            return unchecked(
                f"the cluster did not list its nodes ({error}); the scheduler places the "
                "run, or it waits pending"
            )
        return check_placement(pod_spec, nodes)

    def update_defaults(self, patch: dict[str, Any], user: str) -> Settings:
        """Merge ``patch`` into the stored overrides (``None`` removes a key, back to the
        configured value), its ``policies`` into the stored policy changes
        (:class:`~runplane.service.defaults.Policies`); applies to runs submitted from now on.

        The result is checked whole before anything is saved: the defaults must make a valid
        model and render a function that sets nothing of its own, so no stored default can
        make every later run fail.
        """
        patch = dict(patch)
        policies: dict[str, Any] | None = None
        if "policies" in patch:
            change = patch.pop("policies")
            if change is not None and not isinstance(change, dict):
                raise InvalidValueError(
                    "policies",
                    change,
                    "a mapping of policy changes (null: back to the configured policies)",
                    "{'policies': {'allowed_priority_classes': ['low', 'medium']}}",
                )
            policies = {} if change is None else merge(self.defaults.policies(), change)
        overrides = merge(self.defaults.overrides(), patch)
        updated = apply_overrides(self.base_settings, overrides)
        stored = self.defaults.policies() if policies is None else policies
        updated = apply_policies(updated, self.base_settings, stored)
        render(new_function("defaults-check"), updated)
        self.defaults.save(overrides, user, policies)
        self.runs.settings = updated
        return updated

    def label_node(self, name: str, labels: Mapping[str, str | None]) -> dict[str, str]:
        """Change a node's labels through the runtime (an admin's to do): the Node object on a
        cluster, this machine's stored labels on the embedded default; the labels after."""
        return label_node(self.runs.runtime, name, labels)

    def fire(self, schedule: ScheduleRecord, uid: str) -> bool:
        """Start the run of a due schedule as ``uid``; ``False`` if it already started.

        The run is its creator's, with the Secrets their tokens grant now: a grant taken back
        stops the schedule's runs from reading the Secret too.
        """
        fn = Function.from_dict(schedule.function)
        check_secret_grant(fn, self.tokens.of_user(schedule.created_by, schedule.role))
        try:
            self.runs.submit(
                fn,
                RunOptions(params=schedule.params, state_thresholds=schedule.state_thresholds),
                role=schedule.role or None,
                uid=uid,
                owner=schedule.created_by,
            )
        except RunExistsError:
            return False
        return True

    def _fire_schedules(self) -> None:
        interval = self.base_settings.service.schedule_interval
        while not self._stop.wait(interval):
            if not self.leading.is_set():
                continue
            try:
                self.schedules.fire_due(time.time(), self.fire)
            except Exception:  # a bad schedule must not stop the others
                log.exception("firing schedules failed")

    def sweep(self, now: float | None = None) -> Swept:
        """One pass of the retention policy (:mod:`runplane.service.retention`) as of
        ``now``; the retention loop makes one every ``retention.interval`` seconds."""
        return self.retention.sweep(
            self.settings.retention,
            self.projects.retention_overrides(),
            self.clock() if now is None else now,
            stop=self._stop.is_set,
        )

    def wake_retention(self) -> None:
        """Have the retention loop make a pass now rather than at its next interval."""
        self._retention_due.set()

    def _retain(self) -> None:
        while True:
            self._retention_due.wait(self.base_settings.retention.interval)
            self._retention_due.clear()
            if self._stop.is_set():
                return
            if not self.leading.is_set():
                continue
            try:
                self.sweep()
            except Exception:  # the next pass tries again
                log.exception("removing runs by the retention policy failed")

    def readiness(self) -> list[str]:
        """Why this service should take no traffic now: its database does not answer, or it
        does not see its runs change; empty when it is ready.

        One check at a time: a database that does not answer may hold a connect for minutes,
        and probes every few seconds would otherwise take every worker thread of the API.
        """
        if not self._checking.acquire(blocking=False):
            return ["the previous readiness check is still waiting for the database"]
        try:
            problems = [unreachable(self._engine), self.runs.watching()]
        finally:
            self._checking.release()
        return [problem for problem in problems if problem]

    def close(self, grace: float = 0.0) -> None:
        """Stop firing schedules and close the run service (see :meth:`RunService.close`);
        closing again does nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._retention_due.set()
        self.leading.clear()
        self.runs.close(grace)
        if self.leadership is not None:  # released once nothing here controls any more
            self.leadership.close()

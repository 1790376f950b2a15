"""Project quotas as the service keeps them: set and cleared by admins, read by everyone, and
handed to the runtime, which holds runs to them.

The quota model and its arithmetic are :mod:`runplane.placement.quotas`'s; this module stores
it (table ``project_quotas``: a row per project, flavor and resource), tells what a project's
runs hold against it, and calls :attr:`QuotaStore.on_change` with every project's quotas after
each change (the service wires the runtime's ``apply_quotas`` there: the embedded default's
ledger on this machine, Kueue's queues on a cluster). The service layer never imports a
runtime's code for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Engine, delete, select

from runplane.errors import InvalidValueError, NotFoundError, PolicyError
from runplane.placement.quotas import (
    FLAVORS,
    ON_DEMAND,
    RESOURCES,
    SPOT,
    ProjectQuota,
    QuotaTable,
    ResourceQuota,
    check_flavor,
)
from runplane.runs import RunRecord, RunState
from runplane.service.db import session_factory
from runplane.service.db.models import ProjectQuota as QuotaRow
from runplane.service.records import RunStore
from runplane.spec.labels import check_dns_label
from runplane.spec.quantity import mebibytes, resource_amount

#: What a quota change is handed to: every project's quotas, after the change.
QuotaSync = Callable[[QuotaTable], None]
#: How often a change is handed on again when another process handed an older table meanwhile.
_SYNC_ROUNDS = 5
#: Runs that hold their requests against their project's quota.
HOLDING = (RunState.RUNNING.value, RunState.ABORTING.value)
#: The most live runs read to add up a project's usage.
MAX_HOLDING = 100_000


def _admins_only(project: str, user: str) -> PolicyError:
    return PolicyError(
        "quotas",
        f"a project's quota decides how much of the shared capacity every user's runs in it "
        f"may hold; user {user!r} may read project {project!r}'s quota but not change it "
        "(admins: any project's)",
    )


def _ignore(_: QuotaTable) -> None:
    """No runtime to tell (a store read on its own)."""


class QuotaStore:
    def __init__(self, engine: Engine, on_change: QuotaSync = _ignore) -> None:
        self._sessions = session_factory(engine)
        #: Called with every project's quotas after each change: the runtime's
        #: ``apply_quotas``, which on a cluster with Kueue syncs its ClusterQueues.
        self.on_change = on_change

    def table(self) -> dict[str, ProjectQuota]:
        """Every project's quotas."""
        flavors: dict[str, dict[str, dict[str, ResourceQuota]]] = {}
        with self._sessions() as session:
            for row in session.scalars(select(QuotaRow)):
                flavors.setdefault(row.project, {}).setdefault(row.flavor, {})[row.resource] = (
                    ResourceQuota(row.nominal, row.borrowing_limit, row.lending_limit)
                )
        return {project: ProjectQuota(quotas) for project, quotas in flavors.items()}

    def get(self, project: str) -> ProjectQuota:
        """The project's quotas (none: not limited)."""
        return self.table().get(project, ProjectQuota())

    def kueue_quotas(self, project: str) -> dict[str, dict[str, str]]:
        """Flavor → Kueue resource name (``cpu``, ``memory``, ``nvidia.com/gpu``) → nominal
        quota, for the project's ClusterQueue."""
        return self.get(project).kueue()

    def set_flavor(
        self,
        project: str,
        flavor: str,
        values: Mapping[str, Any],
        user: str,
        admin: bool,
        projects: Callable[[], list[str]] | None = None,
    ) -> ProjectQuota:
        """Replace the project's quota on ``flavor`` with ``values`` (``{'cpu': '16',
        'gpus': {'nominal': 2, 'borrowing_limit': 0}}``): an admin's to do; checked whole
        before anything is stored, then, given ``projects`` (every project's name), set only
        on a project that exists."""
        check_dns_label("project", project, "'team-a'")
        check_flavor("flavor", flavor)
        if not admin:
            raise _admins_only(project, user)
        quotas = ProjectQuota.flavor_of(f"quotas.{flavor}", values)
        if projects is not None and project not in projects():
            raise NotFoundError(
                f"project {project!r} does not exist: create it first "
                f"(runplane.new_project({project!r}), or POST /api/v1/projects)"
            )
        now = time.time()
        with self._sessions.begin() as session:
            session.execute(
                delete(QuotaRow).where(QuotaRow.project == project, QuotaRow.flavor == flavor)
            )
            for resource, quota in quotas.items():
                session.add(
                    QuotaRow(
                        project=project,
                        flavor=flavor,
                        resource=resource,
                        nominal=quota.nominal,
                        borrowing_limit=quota.borrowing_limit,
                        lending_limit=quota.lending_limit,
                        updated_at=now,
                        updated_by=user,
                    )
                )
        return self._changed(project)

    def clear(self, project: str, flavor: str | None, user: str, admin: bool) -> ProjectQuota:
        """Drop the project's quota on ``flavor`` (``None``: on every flavor): its runs are
        no longer limited there. An admin's to do."""
        check_dns_label("project", project, "'team-a'")
        if flavor is not None:
            check_flavor("flavor", flavor)
        if not admin:
            raise _admins_only(project, user)
        wanted = [QuotaRow.project == project]
        if flavor is not None:
            wanted.append(QuotaRow.flavor == flavor)
        with self._sessions.begin() as session:
            session.execute(delete(QuotaRow).where(*wanted))
        return self._changed(project)

    def forget(self, project: str) -> None:
        """A deleted project's quotas go with it."""
        with self._sessions.begin() as session:
            found = session.execute(delete(QuotaRow).where(QuotaRow.project == project))
        if getattr(found, "rowcount", 0):
            self._sync()

    def _changed(self, project: str) -> ProjectQuota:
        return self._sync().get(project, ProjectQuota())

    def _sync(self) -> QuotaTable:
        """Hand the stored table to :attr:`on_change` until what was handed is still what is
        stored: another process changing quotas at the same moment may have handed an older
        table after this one's change (the machine's ledger keeps the table written last), and
        whichever hands last reads again after it."""
        table = self.table()
        for _ in range(_SYNC_ROUNDS):
            self.on_change(table)
            again = self.table()
            if again == table:
                break
            table = again
        return table


def _flavor_of(record: RunRecord) -> str:
    """The flavor a run holds its requests on: its current attempt's node's."""
    current = next((a for a in record.attempts if a.number == record.attempt), None)
    return SPOT if current is not None and current.spot else ON_DEMAND


def _shown(resource: str, amount: int) -> str:
    if resource == "cpu":
        return f"{amount / 1000:g}"
    if resource == "memory":
        return mebibytes(amount) if amount else "0"
    return str(amount)


def usage_view(quota: ProjectQuota, runs: list[RunRecord]) -> dict[str, Any]:
    """What a project's running runs hold on each flavor against its quota: flavor →
    resource → ``{nominal, borrowing_limit, lending_limit, used}`` (``used`` as a quantity),
    for every flavor and resource with a quota or with something held."""
    used: dict[str, dict[str, int]] = {}
    for record in runs:
        held = used.setdefault(_flavor_of(record), {})
        # A run resized in place holds its requests grown by as much as its limits.
        grown = {"cpu": 0, "memory": 0}
        for change in record.resizes:
            if change.applied and change.attempt == record.attempt:
                for name, before, after in (
                    ("memory", change.memory_from, change.memory_to),
                    ("cpu", change.cpu_from, change.cpu_to),
                ):
                    if before is not None and after is not None:
                        grown[name] += after - before
        for resource, kube_name in RESOURCES.items():
            value = record.requests.get(kube_name)
            if value is None:
                continue
            try:
                amount = resource_amount(kube_name, value)
            except InvalidValueError:
                continue
            amount = max(amount + grown.get(kube_name, 0), 0)
            held[resource] = held.get(resource, 0) + amount
    view: dict[str, Any] = {}
    for flavor in FLAVORS:
        quotas = quota.flavors.get(flavor, {})
        held = used.get(flavor, {})
        resources = {}
        for resource in RESOURCES:
            terms = quotas.get(resource)
            if terms is None and resource not in held:
                continue
            entry: dict[str, Any] = (
                terms.to_json()
                if terms
                else {"nominal": None, "borrowing_limit": None, "lending_limit": None}
            )
            entry["used"] = _shown(resource, held.get(resource, 0))
            resources[resource] = entry
        if resources:
            view[flavor] = resources
    return view


def project_usage(store: QuotaStore, runs: RunStore, project: str) -> dict[str, Any]:
    """The project's quotas with what its runs hold now (``runs``: the run store)."""
    check_dns_label("project", project, "'team-a'")
    holding = runs.list_runs(project, states=HOLDING, limit=MAX_HOLDING, brief=True)
    return {"project": project, "flavors": usage_view(store.get(project), holding)}

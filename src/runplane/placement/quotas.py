"""Project quotas: how much of each flavor of capacity a project's runs may hold at once, and
whether a run's requests fit its project's quota now, in Kueue's model.

A quota is set per project, flavor (``on-demand`` or ``spot``, the two kinds of node the spot
preset tells apart) and resource (``cpu``, ``memory``, ``gpus``), as Kueue's ClusterQueue
sets it per ResourceFlavor: a ``nominal`` quantity the project is guaranteed, an optional
``borrowing_limit`` (how much more than nominal it may take from idle quota of the other
projects; unset: as much as is idle, ``0``: none) and an optional ``lending_limit`` (how much
of its nominal quota others may borrow while it is idle; unset: all of it). Every project with
a quota is in one cohort. A project, flavor or resource with no quota is not limited.

The same arithmetic serves both backends: the Kubernetes side hands these fields to Kueue
(:meth:`ProjectQuota.kueue`), and the embedded default decides with :func:`shortfall`, so a
run that waits for quota on a cluster waits here too, saying so in the same words
(:func:`waiting_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from runplane import names
from runplane.errors import InvalidValueError
from runplane.spec.quantity import parse_quantity, resource_amount

ON_DEMAND, SPOT = "on-demand", "spot"
FLAVORS = (ON_DEMAND, SPOT)
#: A quota's resources, by the name users give them, and the Kubernetes (and Kueue) name
#: each counts against.
RESOURCES: dict[str, str] = {"cpu": "cpu", "memory": "memory", "gpus": names.GPU}
TERMS = ("nominal", "borrowing_limit", "lending_limit")
#: The wording runs waiting for quota carry; what follows names the project and shortfall.
WAITING_FOR_QUOTA = "waiting for quota"

_EXAMPLE = "{'cpu': '16', 'memory': '64Gi', 'gpus': {'nominal': 2, 'borrowing_limit': 0}}"
_EXAMPLES = {"cpu": "'16', '500m'", "memory": "'64Gi', '512Mi'", "gpus": "2"}


def check_flavor(field_name: str, value: object) -> str:
    if value not in FLAVORS:
        raise InvalidValueError(
            field_name,
            value,
            "a flavor is 'on-demand' or 'spot' (the spot preset's two kinds of node)",
            "'on-demand'",
        )
    return str(value)


def _check_amount(field_name: str, resource: str, value: object) -> str:
    """A quantity of ``resource`` as written, checked: ASCII digits, not negative, GPUs whole."""
    example = _EXAMPLES[resource]
    kind = "cpu" if resource == "cpu" else "memory"
    if isinstance(value, str):
        value = value.strip()
    parsed = parse_quantity(field_name, value, kind, example)
    if parsed < 0:
        raise InvalidValueError(field_name, value, "a quota is not negative", example)
    if resource == "gpus" and parsed.denominator != 1:
        raise InvalidValueError(field_name, value, "GPUs are counted whole", example)
    return str(value)


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource's quota on one flavor, as written (``'16'``, ``'64Gi'``)."""

    nominal: str
    borrowing_limit: str | None = None
    lending_limit: str | None = None

    @classmethod
    def of(cls, field_name: str, resource: str, value: object) -> ResourceQuota:
        """A resource's quota from a quantity (the nominal quota) or a mapping of
        :data:`TERMS`; checked, naming the field."""
        terms: Mapping[str, Any] = value if isinstance(value, Mapping) else {"nominal": value}
        unknown = [key for key in terms if key not in TERMS]
        if unknown or "nominal" not in terms:
            raise InvalidValueError(
                f"{field_name}.{unknown[0]}" if unknown else field_name,
                value,
                "a resource's quota is a quantity (its nominal quota) or a mapping of "
                "nominal (required), borrowing_limit and lending_limit",
                f"{{'nominal': {_EXAMPLES[resource].split(', ')[0]}, 'borrowing_limit': 0}}",
            )
        checked = {
            key: None
            if terms.get(key) is None
            else _check_amount(f"{field_name}.{key}", resource, terms[key])
            for key in TERMS
        }
        nominal = checked["nominal"]
        if nominal is None:
            raise InvalidValueError(f"{field_name}.nominal", None, "a quantity", _EXAMPLE)
        quota = cls(nominal, checked["borrowing_limit"], checked["lending_limit"])
        if quota.lending_limit is not None and _value(quota.lending_limit) > _value(nominal):
            raise InvalidValueError(
                f"{field_name}.lending_limit",
                quota.lending_limit,
                f"a project lends at most its nominal quota ({nominal})",
                nominal,
            )
        return quota

    def amounts(self, kube_name: str) -> tuple[int, int | None, int]:
        """(nominal, borrowing limit or ``None``, lendable) in placement's units."""
        nominal = resource_amount(kube_name, self.nominal)
        borrowing, lending = self.borrowing_limit, self.lending_limit
        return (
            nominal,
            None if borrowing is None else resource_amount(kube_name, borrowing),
            nominal if lending is None else min(resource_amount(kube_name, lending), nominal),
        )

    def to_json(self) -> dict[str, str | None]:
        return {
            "nominal": self.nominal,
            "borrowing_limit": self.borrowing_limit,
            "lending_limit": self.lending_limit,
        }


def _value(text: str) -> Fraction:
    return parse_quantity("quota", text, "memory")


@dataclass(frozen=True, slots=True)
class ProjectQuota:
    """A project's quotas: flavor → resource (``cpu``, ``memory``, ``gpus``) → quota."""

    flavors: Mapping[str, Mapping[str, ResourceQuota]] = field(default_factory=dict)

    @classmethod
    def flavor_of(cls, field_name: str, values: object) -> dict[str, ResourceQuota]:
        """One flavor's quotas from ``{'cpu': '16', 'gpus': {'nominal': 2}}``, checked."""
        if not isinstance(values, Mapping) or not values:
            raise InvalidValueError(
                field_name,
                values,
                "a flavor's quota maps cpu, memory and/or gpus to a quantity or to "
                "{'nominal': ..., 'borrowing_limit': ..., 'lending_limit': ...}",
                _EXAMPLE,
            )
        quotas = {}
        for resource, value in values.items():
            if resource not in RESOURCES:
                raise InvalidValueError(
                    field_name,
                    resource,
                    "a quota's resources are " + ", ".join(RESOURCES),
                    _EXAMPLE,
                )
            quotas[resource] = ResourceQuota.of(f"{field_name}.{resource}", resource, value)
        return quotas

    def kueue(self) -> dict[str, dict[str, str]]:
        """Flavor → Kueue resource name (``cpu``, ``memory``, ``nvidia.com/gpu``) → nominal
        quota, as a ClusterQueue's ``nominalQuota`` takes them."""
        return {
            flavor: {RESOURCES[resource]: quota.nominal for resource, quota in resources.items()}
            for flavor, resources in self.flavors.items()
            if resources
        }

    def to_json(self) -> dict[str, dict[str, dict[str, str | None]]]:
        return {
            flavor: {resource: quota.to_json() for resource, quota in resources.items()}
            for flavor, resources in self.flavors.items()
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Mapping[str, Any]]) -> ProjectQuota:
        return cls(
            {
                flavor: {resource: ResourceQuota(**terms) for resource, terms in resources.items()}
                for flavor, resources in data.items()
            }
        )


#: Every project's quotas, by project name.
QuotaTable = Mapping[str, ProjectQuota]
#: What runs hold now: (project, flavor) → Kubernetes resource name → amount in placement's
#: units (millicores, bytes, devices).
Usage = Mapping[tuple[str, str], Mapping[str, int]]


class QuotaBook:
    """Every project's quotas with what runs hold, for one admission pass: checking a run and
    counting it admitted cost a few additions per resource, however many projects there are.

    As Kueue counts: each project's quota is its nominal amount, of which the part it does not
    lend is its own; the cohort's pool (per flavor and resource) is what every project lends,
    and a project beyond its own part draws on the pool, beyond its nominal amount at most its
    borrowing limit.
    """

    def __init__(self, table: QuotaTable, usage: Usage | None = None) -> None:
        #: (project, flavor) → Kubernetes resource name → (nominal, borrowing limit, lendable).
        self._limits: dict[tuple[str, str], dict[str, tuple[int, int | None, int]]] = {}
        self._pool: dict[tuple[str, str], int] = {}
        self._drawn: dict[tuple[str, str], int] = {}
        self._used: dict[tuple[str, str], dict[str, int]] = {
            queue: dict(held) for queue, held in (usage or {}).items()
        }
        for project, quota in table.items():
            for flavor, resources in quota.flavors.items():
                limits = self._limits.setdefault((project, flavor), {})
                for resource, terms in resources.items():
                    kube_name = RESOURCES[resource]
                    limits[kube_name] = terms.amounts(kube_name)
                    nominal, _, lendable = limits[kube_name]
                    key = (flavor, kube_name)
                    self._pool[key] = self._pool.get(key, 0) + lendable
                    used = self._used.get((project, flavor), {}).get(kube_name, 0)
                    drawn = max(used - (nominal - lendable), 0)
                    self._drawn[key] = self._drawn.get(key, 0) + drawn

    def shortfall(self, project: str, flavor: str, requests: Mapping[str, int]) -> dict[str, int]:
        """What ``requests`` lack to fit ``project``'s quota on ``flavor`` now, by Kubernetes
        resource name (empty: they fit), borrowing idle quota of the cohort within limits."""
        short: dict[str, int] = {}
        limits = self._limits.get((project, flavor))
        if not limits:
            return short
        held = self._used.get((project, flavor), {})
        for kube_name, (nominal, borrowing, lendable) in limits.items():
            wanted = requests.get(kube_name, 0)
            if not wanted:
                continue
            used = held.get(kube_name, 0)
            after = used + wanted
            lacking = 0 if borrowing is None else max(after - nominal - borrowing, 0)
            own = nominal - lendable
            key = (flavor, kube_name)
            drawn = self._drawn.get(key, 0) - max(used - own, 0) + max(after - own, 0)
            lacking = max(lacking, drawn - self._pool.get(key, 0))
            if lacking > 0:
                short[kube_name] = lacking
        return short

    def borrows(self, project: str, flavor: str, requests: Mapping[str, int]) -> bool:
        """Whether ``requests`` would take ``project`` beyond its nominal quota on ``flavor``
        (such runs are admitted after every run within its own quota: reclaimed first)."""
        held = self._used.get((project, flavor), {})
        return any(
            held.get(kube_name, 0) + requests.get(kube_name, 0) > nominal
            for kube_name, (nominal, _, _) in self._limits.get((project, flavor), {}).items()
        )

    def add(self, project: str, flavor: str, requests: Mapping[str, int]) -> None:
        """Count ``requests`` as held by ``project`` on ``flavor``."""
        held = self._used.setdefault((project, flavor), {})
        limits = self._limits.get((project, flavor), {})
        for kube_name, amount in requests.items():
            used = held.get(kube_name, 0)
            held[kube_name] = used + amount
            if kube_name in limits:
                nominal, _, lendable = limits[kube_name]
                own = nominal - lendable
                key = (flavor, kube_name)
                change = max(used + amount - own, 0) - max(used - own, 0)
                self._drawn[key] = self._drawn.get(key, 0) + change


def shortfall(
    table: QuotaTable, usage: Usage, project: str, flavor: str, requests: Mapping[str, int]
) -> dict[str, int]:
    """:meth:`QuotaBook.shortfall` of one run."""
    return QuotaBook(table, usage).shortfall(project, flavor, requests)


def borrows(
    table: QuotaTable, usage: Usage, project: str, flavor: str, requests: Mapping[str, int]
) -> bool:
    """:meth:`QuotaBook.borrows` of one run."""
    return QuotaBook(table, usage).borrows(project, flavor, requests)


def _amount_text(kube_name: str, amount: int) -> str:
    if kube_name == "cpu":
        cores = amount / 1000
        return f"{cores:g} CPU" + ("" if cores == 1 else "s")
    if kube_name == "memory":
        return f"{amount / 2**30:.3g}Gi of memory"
    return f"{amount} GPU" + ("" if amount == 1 else "s")


def quota_text(project: str, flavor: str, short: Mapping[str, int]) -> str:
    """Why a running run of ``project`` may not grow by what it lacks: ``project team-a's
    quota on on-demand cannot hold it: it needs 4 CPUs more``."""
    needs = " and ".join(_amount_text(name, amount) for name, amount in sorted(short.items()))
    return f"project {project}'s quota on {flavor} cannot hold it: it needs {needs} more"


#: The runs ahead of a waiting run are counted up to this many; beyond, it is "more than 20
#: runs ahead of it". The text of a run far back in a long queue so stays the same while the
#: queue moves, and nothing needs to say it again: only the first runs' counts are kept fresh.
MOST_AHEAD_SAID = 20


def ahead_text(ahead: int) -> str:
    """``no run``, ``1 run``, ``2 runs`` ... ``ahead of it``, capped at :data:`MOST_AHEAD_SAID`."""
    if ahead > MOST_AHEAD_SAID:
        return f"more than {MOST_AHEAD_SAID} runs ahead of it"
    runs = "no run" if not ahead else f"{ahead} run" + ("" if ahead == 1 else "s")
    return f"{runs} ahead of it"


def waiting_text(project: str, flavor: str, short: Mapping[str, int], ahead: int) -> str:
    """Why a run waits for quota, the same words on every backend: ``waiting for quota:
    project team-a needs 4 CPUs more on on-demand; 2 runs ahead of it`` (``more than 20 runs
    ahead of it`` beyond :data:`MOST_AHEAD_SAID`)."""
    needs = " and ".join(_amount_text(name, amount) for name, amount in sorted(short.items()))
    return (
        f"{WAITING_FOR_QUOTA}: project {project} needs {needs} more on {flavor}; "
        f"{ahead_text(ahead)}"
    )

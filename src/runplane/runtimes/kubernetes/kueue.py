"""Kueue (sigs.k8s.io/kueue) as the queue of a cluster that has it: queues, flavors, labels.

Where the API server serves Kueue's CRDs (API discovery, asked afresh when the runtime starts),
runplane leaves admission to Kueue instead of holding multi-pod runs itself (:mod:`.gang`):
every workload it submits carries the queue label of its project's LocalQueue, and Kueue keeps
it suspended (an MPIJob, a SparkApplication) or its pods gated (a job's pod, a serving
Deployment's pods) until the project's ClusterQueue has quota for all of it.

What runplane sets up on such a cluster, all by server-side apply (a repeat is a no-op):

- two ResourceFlavors from the spot preset (``Settings.spot``): ``on-demand`` with the preset's
  on-demand node labels, ``spot`` with its spot labels and, as ``nodeTaints``, the taints its
  tolerations admit. Kueue only assigns a flavor whose labels a pod's required affinity admits
  and whose taints it tolerates, so the preemption modes' rendering decides: ``prevent`` (NotIn
  spot, no spot toleration) can only get ``on-demand``, ``constrain`` (In spot) only ``spot``,
  ``allow`` (spot tolerated, no affinity) ``spot`` first, then ``on-demand`` (each ClusterQueue
  lists ``spot`` first; ``whenCanBorrow: TryNextFlavor`` keeps looking before borrowing).
- a WorkloadPriorityClass per user class (``runplane-low`` ...), valued as the PriorityClasses.
- per project, a ClusterQueue in the one cohort :data:`COHORT` (idle quota is lent to others and
  reclaimed from them: ``reclaimWithinCohort: Any``; a higher priority preempts a lower one
  within a queue) and a LocalQueue in the runtime's namespace, named after the project.

Quotas are the admin's (:func:`sync_project_queue`); a project with none gets
:data:`UNLIMITED` per flavor, so that its runs are admitted and only the nodes bound them, and
lends none of it (``lendingLimit: 0``): a project that has a quota borrows only what other
projects with quotas leave idle.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runplane import names
from runplane.config import PreemptibleNodes, PriorityClasses
from runplane.errors import InvalidValueError
from runplane.placement.quotas import RESOURCES as QUOTA_RESOURCES
from runplane.placement.quotas import ProjectQuota, ahead_text, waiting_text
from runplane.runtimes.kubernetes.api.calls import Calls
from runplane.runtimes.kubernetes.api.rest import APPLY_PATCH
from runplane.spec.labels import check_dns_label
from runplane.spec.quantity import parse_quantity, resource_amount

GROUP = "kueue.x-k8s.io"
API_VERSION = f"{GROUP}/v1beta2"
#: The label that puts a workload in a LocalQueue.
QUEUE_LABEL = f"{GROUP}/queue-name"
#: The label that gives a workload a WorkloadPriorityClass.
PRIORITY_LABEL = f"{GROUP}/priority-class"
#: The gate Kueue holds a pod with until its workload is admitted.
ADMISSION_GATE = f"{GROUP}/admission"
#: The kinds whose presence says a cluster runs Kueue (all must be served).
PLURALS = ("resourceflavors", "clusterqueues", "localqueues", "workloads")
COHORT = "runplane"
ON_DEMAND = "on-demand"
SPOT = "spot"
FLAVORS = (SPOT, ON_DEMAND)
#: The resources a ClusterQueue counts; a workload asking for another is inadmissible unless
#: Kueue's configuration excludes it.
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
#: A project's quota per flavor when the admin set none: larger than any cluster, so that only
#: the nodes bound its runs.
UNLIMITED: Mapping[str, str] = {"cpu": "100000", "memory": "1000Ti", "nvidia.com/gpu": "10000"}
#: Reason words of a run that Kueue holds.
WAITING_FOR_QUOTA = "WaitingForQuota"
#: A resource's quota on one flavor: its nominal quantity, or Kueue's terms for it
#: (``{"nominalQuota": "16", "borrowingLimit": "0", "lendingLimit": "8"}``).
Terms = str | Mapping[str, str]
#: The terms of a ClusterQueue's resource, as Kueue's API names them.
QUOTA_TERMS = ("nominalQuota", "borrowingLimit", "lendingLimit")


def served(calls: Calls) -> bool:
    """Whether the cluster runs Kueue: its CRDs served now (discovery asked afresh)."""
    return all(calls.serves(API_VERSION, plural, fresh=i == 0) for i, plural in enumerate(PLURALS))


def flavors(spot: PreemptibleNodes) -> list[dict[str, Any]]:
    """The two ResourceFlavors of the spot preset."""
    taints = [
        {"key": t["key"], "value": t.get("value", ""), "effect": t.get("effect", "NoSchedule")}
        for t in spot.tolerations
        if t.get("key")
    ]
    # A node is spot by any one of the preset's labels; a flavor's labels must all match, so
    # the first names spot nodes (the GKE preset has two, for two kinds of spot VM).
    spot_labels = dict(list(spot.node_selector.items())[:1])
    return [
        _object("ResourceFlavor", ON_DEMAND, {"nodeLabels": dict(spot.on_demand_labels)}),
        _object(
            "ResourceFlavor",
            SPOT,
            {"nodeLabels": spot_labels, **({"nodeTaints": taints[:1]} if taints else {})},
        ),
    ]


def priority_classes(classes: PriorityClasses) -> list[dict[str, Any]]:
    """A WorkloadPriorityClass per user class, valued as its PriorityClass."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": priority_class(name), "labels": _owned()},
            "value": classes.value_of(name),
            "description": f"runplane user class {name}: the order Kueue admits and preempts",
        }
        for name in classes.valid
    ]


def priority_class(name: str) -> str:
    """The WorkloadPriorityClass of a runplane priority class."""
    return f"runplane-{name}"


def cluster_queue_name(namespace: str, project: str) -> str:
    """Cluster-wide, so the runtime's namespace is in it: two services never share one."""
    return f"{namespace}.{project}"


def quota_terms(quota: ProjectQuota) -> dict[str, dict[str, Terms]]:
    """A project's quota as its ClusterQueue takes it: flavor -> Kueue resource name -> its
    nominal quota and, where the admin set them, its borrowing and lending limits."""
    out: dict[str, dict[str, Terms]] = {}
    for flavor, resources in quota.flavors.items():
        terms: dict[str, Terms] = {}
        for resource, limits in resources.items():
            given = {
                "nominalQuota": limits.nominal,
                "borrowingLimit": limits.borrowing_limit,
                "lendingLimit": limits.lending_limit,
            }
            terms[QUOTA_RESOURCES[resource]] = {k: v for k, v in given.items() if v is not None}
        if terms:
            out[flavor] = terms
    return out


def _resource_terms(resource: str, terms: Terms) -> dict[str, str]:
    given = {"nominalQuota": terms} if isinstance(terms, str) else terms
    return {"name": resource, **{k: str(given[k]) for k in QUOTA_TERMS if k in given}}


def cluster_queue(
    namespace: str, project: str, quotas: Mapping[str, Mapping[str, Terms]]
) -> dict[str, Any]:
    """A project's ClusterQueue: ``quotas`` per flavor (:data:`UNLIMITED` for one not given),
    each resource's nominal quota with its borrowing and lending limits where given (a
    ``borrowingLimit`` of 0: the project never takes more than its own; a ``lendingLimit``:
    the most of its idle quota others may take)."""
    flavored = []
    for flavor in FLAVORS:
        given = quotas.get(flavor) or {}
        resources = []
        for resource in RESOURCES:
            if resource in given:
                resources.append(_resource_terms(resource, given[resource]))
            else:  # unlimited, and lent to nobody: a quota elsewhere in the cohort still holds
                resources.append(
                    {"name": resource, "nominalQuota": UNLIMITED[resource], "lendingLimit": "0"}
                )
        flavored.append({"name": flavor, "resources": resources})
    spec = {
        "cohortName": COHORT,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [{"coveredResources": list(RESOURCES), "flavors": flavored}],
        # allow: spot first; on-demand before borrowing spot from another project
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority"},
            "withinClusterQueue": "LowerPriority",
        },
    }
    return _object("ClusterQueue", cluster_queue_name(namespace, project), spec)


def local_queue(namespace: str, project: str) -> dict[str, Any]:
    body = _object("LocalQueue", project, {"clusterQueue": cluster_queue_name(namespace, project)})
    body["metadata"]["namespace"] = namespace
    return body


def check_quotas(quotas: Mapping[str, Mapping[str, Terms]]) -> None:
    """Flavors and resources runplane's queues know, with quantities Kubernetes reads."""
    for flavor, resources in quotas.items():
        if flavor not in FLAVORS:
            raise InvalidValueError(
                "quotas", flavor, f"a flavor: one of {', '.join(FLAVORS)}", '{"on-demand": {...}}'
            )
        for resource, terms in resources.items():
            if resource not in RESOURCES:
                raise InvalidValueError(
                    f"quotas.{flavor}",
                    resource,
                    f"a resource Kueue counts here: one of {', '.join(RESOURCES)}",
                    '{"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}',
                )
            given = {"nominalQuota": terms} if isinstance(terms, str) else terms
            unknown = [k for k in given if k not in QUOTA_TERMS]
            if unknown or "nominalQuota" not in given:
                raise InvalidValueError(
                    f"quotas.{flavor}.{resource}",
                    unknown[0] if unknown else dict(given),
                    f"a quantity, or a mapping of {', '.join(QUOTA_TERMS)} (nominalQuota required)",
                    '{"nominalQuota": "16", "borrowingLimit": "0"}',
                )
            kind = "cpu" if resource == "cpu" else "memory"
            for term, amount in given.items():
                where = "" if isinstance(terms, str) else f".{term}"
                parse_quantity(f"quotas.{flavor}.{resource}{where}", amount, kind)


def sync_project_queue(
    calls: Calls, project: str, quotas: Mapping[str, Mapping[str, Terms]] | None = None
) -> None:
    """Make ``project``'s ClusterQueue say ``quotas`` (flavor -> resource -> quantity or
    :data:`Terms`, e.g. ``{"on-demand": {"cpu": {"nominalQuota": "16", "borrowingLimit": "0"},
    "memory": "64Gi"}}``; a flavor or resource left out is :data:`UNLIMITED`), and its
    LocalQueue exist. Safe to repeat."""
    check_dns_label("project", project, "'team-a'")
    quotas = quotas or {}
    check_quotas(quotas)
    apply(calls, cluster_queue(calls.namespace, project, quotas))
    apply(calls, local_queue(calls.namespace, project))


def ensure_cluster_setup(calls: Calls, spot: PreemptibleNodes, classes: PriorityClasses) -> None:
    """The flavors and priority classes every project's queues use."""
    for body in (*flavors(spot), *priority_classes(classes)):
        apply(calls, body)


def apply(calls: Calls, body: Mapping[str, Any]) -> None:
    """Server-side apply, field manager ``runplane``."""
    meta = body["metadata"]
    plural = {
        "ResourceFlavor": "resourceflavors",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
        "WorkloadPriorityClass": "workloadpriorityclasses",
    }[body["kind"]]
    where = f"/namespaces/{meta['namespace']}" if "namespace" in meta else ""
    path = f"/apis/{API_VERSION}{where}/{plural}/{meta['name']}"
    calls.checked(
        f"applying {body['kind']} {meta['name']}",
        lambda: calls.json(
            "PATCH",
            path,
            {"fieldManager": names.MANAGER, "force": "true"},
            body=json.dumps(body),
            content_type=APPLY_PATCH,
        ),
    )


def label(workload: dict[str, Any], project: str, priority: str | None) -> None:
    """Put ``workload`` (a rendered Pod, MPIJob, SparkApplication or Deployment) in its
    project's queue, with its priority; changed in place."""
    labels = workload.setdefault("metadata", {}).setdefault("labels", {})
    labels[QUEUE_LABEL] = project
    if priority:
        labels[PRIORITY_LABEL] = priority_class(priority)


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": _owned()},
        "spec": spec,
    }


def _owned() -> dict[str, str]:
    return {names.MANAGED_BY: names.MANAGER}


@dataclass(frozen=True)
class Waiting:
    """Why Kueue holds a workload, in its words."""

    reason: str
    message: str
    #: Whether it waits for quota (not for a node: once admitted, the scheduler places it).
    for_quota: bool


def considered(workload: Mapping[str, Any]) -> bool:
    """Whether Kueue has said anything of ``workload`` yet (a ``QuotaReserved`` or
    ``Admitted`` condition): until it has, a gated pod already says it waits for Kueue."""
    conditions = (workload.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("QuotaReserved", "Admitted") for c in conditions)


def waiting(workload: Mapping[str, Any], ahead: int | None = None) -> Waiting | None:
    """Why ``workload`` is not admitted (``None`` once it is): its ``QuotaReserved`` condition's
    message, with the runs ``ahead`` of it in its queue (else the position Kueue's status
    reports, where it does)."""
    status = workload.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    admitted = conditions.get("Admitted") or {}
    if admitted.get("status") == "True":
        return None
    reserved = conditions.get("QuotaReserved") or {}
    if reserved.get("status") == "True":
        checks = admitted.get("message") or "quota reserved, waiting for its admission checks"
        return Waiting(WAITING_FOR_QUOTA, checks, False)
    said = reserved.get("message") or "waiting for Kueue to admit it"
    ahead = ahead if ahead is not None else _position(workload)
    return Waiting(WAITING_FOR_QUOTA, _plain(queue_of(workload), said, ahead), True)


def queue_of(workload: Mapping[str, Any]) -> str:
    """The LocalQueue a workload waits in (its project, for runplane's)."""
    labels = (workload.get("metadata") or {}).get("labels") or {}
    return str(labels.get(QUEUE_LABEL) or (workload.get("spec") or {}).get("queueName") or "")


def _plain(queue: str, message: str, ahead: int | None) -> str:
    """Kueue's "couldn't assign flavors to pod set main: insufficient unused quota for cpu in
    flavor on-demand, 4 more needed" in the words a quota wait has on every backend
    (:func:`~runplane.placement.quotas.waiting_text`): "waiting for quota: project team-a
    needs 4 CPUs more on on-demand; 2 runs ahead of it"; any other word of Kueue's as it is."""
    found = re.search(
        r"insufficient (?:unused )?quota for (\S+) in flavor (\S+?),? (\S+) more needed", message
    )
    if found and found.group(1) in RESOURCES:
        resource, flavor, more = found.groups()
        try:
            short = {resource: resource_amount(resource, more)}
        except InvalidValueError:
            short = {}
        if short:
            text = waiting_text(queue, flavor, short, ahead or 0)
            return text if ahead is not None else text.rsplit("; ", 1)[0]
    text = f"waiting in Kueue's queue {queue!r}: {message}"
    return text if ahead is None else f"{text}; {ahead_text(ahead)}"


def _position(workload: Mapping[str, Any]) -> int | None:
    """Runs ahead of ``workload`` in its queue, where Kueue's status says (visibility data)."""
    status = workload.get("status") or {}
    for key in ("positionInLocalQueue", "positionInClusterQueue"):
        value = status.get(key)
        if isinstance(value, int):
            return value
    return None


def evicted(workload: Mapping[str, Any]) -> tuple[str, str] | None:
    """Kueue's reason and message where it evicted ``workload`` (preempted by a higher priority
    or reclaimed by its cohort), else ``None``."""
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Evicted" and condition.get("status") == "True":
            return str(condition.get("reason") or "Evicted"), str(condition.get("message") or "")
    return None

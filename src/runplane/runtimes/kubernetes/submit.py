"""Creating a run's objects on the cluster, safe to repeat.

The pod name is deterministic per (run uid, attempt), so a create retried after a timeout, or
repeated after a crash, finds its own pod (409) instead of making a second one. A pod or Secret
of the same name that runplane did not make for this run is never taken over.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from kubernetes.client.exceptions import ApiException

from runplane import names
from runplane.errors import ConflictError, InvalidValueError
from runplane.runtimes.kubernetes import operators, podgroup
from runplane.runtimes.kubernetes.api.calls import Calls
from runplane.runtimes.kubernetes.api.rest import collection_path, manifest_path

log = logging.getLogger(__name__)

#: The operators' workloads a run may be (docs/runtimes.md), besides a Pod.
WORKLOADS = (
    ("kubeflow.org/v2beta1", "MPIJob"),
    ("kubeflow.org/v1", "MPIJob"),
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
)


class Submitter:
    """Creates runs' pods and Secrets in one namespace, labelled as this runtime's."""

    def __init__(self, calls: Calls, instance: str | None) -> None:
        self.calls = calls
        self.namespace = calls.namespace
        self.instance = instance
        self._known_configmaps: set[str] = set()

    def check(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        """A run is one workload (a Pod, or an MPIJob or SparkApplication for its operator),
        named and labelled per attempt, and the Secrets and the bootstrap ConfigMap it needs."""
        workloads = []
        for manifest in manifests:
            kind = manifest.get("kind")
            if kind == "DaskCluster":
                raise InvalidValueError(
                    "kind",
                    kind,
                    "a dask function is a cluster used through its client, not a run",
                    "client = fn.client",
                )
            if kind not in ("Pod", "Secret", "ConfigMap", *(k for _, k in WORKLOADS)):
                raise InvalidValueError(
                    "kind",
                    kind,
                    "the Kubernetes runtime runs jobs: a rendered Pod (or MPIJob or "
                    "SparkApplication), its Secrets and runplane's bootstrap ConfigMap",
                    "runplane.new_function('train', kind='job')",
                )
            namespace = (manifest.get("metadata") or {}).get("namespace", self.namespace)
            if namespace != self.namespace:
                raise ConflictError(
                    "metadata.namespace",
                    f"{manifest['metadata'].get('name')!r} was rendered for namespace "
                    f"{namespace!r}, but this runtime runs in {self.namespace!r}; render with "
                    "the runtime's settings",
                )
            if kind not in ("Secret", "ConfigMap"):
                workloads.append(manifest)
        if len(workloads) != 1 or not workloads[0]["metadata"].get("labels", {}).get(names.RUN_UID):
            raise InvalidValueError(
                "manifests",
                [m.get("kind") for m in workloads],
                "a run is one Pod (or MPIJob or SparkApplication), rendered with a run "
                "reference so it is named and labelled per attempt",
                "build_request(fn, settings, uid=...)",
            )

    def check_served(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        """Refuse a workload whose kind the cluster does not serve (no CRD: no operator), before
        anything of the run is created. Discovery is asked now, not from what was known: an
        operator installed, or removed, a moment ago counts (one request, for an operator's
        kinds only)."""
        for manifest in manifests:
            api_version, kind = manifest.get("apiVersion", ""), manifest.get("kind", "")
            if (api_version, kind) not in WORKLOADS:
                continue
            plural = collection_path(api_version, kind, self.namespace).rsplit("/", 1)[1]
            if not self.calls.serves(api_version, plural, fresh=True):
                raise operators.missing(api_version, kind, self.namespace)

    def submit(
        self, manifests: Iterable[Mapping[str, Any]], gang: list[dict[str, Any]] | None = None
    ) -> str:
        """Create the run's ConfigMap and Secrets, then its workload; returns its name.

        ``gang``: the pod specs of a multi-pod workload, for a coscheduling ``PodGroup`` of
        all of them where the cluster serves one (:mod:`.podgroup`)."""
        manifests = list(manifests)
        self.check(manifests)  # owning adds labels and a namespace, which it checks the same
        for configmap in (m for m in manifests if m["kind"] == "ConfigMap"):
            self._ensure_configmap(configmap)
        owned = [self._own(m) for m in manifests if m["kind"] != "ConfigMap"]
        for secret in (m for m in owned if m["kind"] == "Secret"):
            self._apply_secret(secret)
        (workload,) = (m for m in owned if m["kind"] not in ("Secret", "ConfigMap"))
        if workload["kind"] == "Pod":
            self._create_own(workload, answer=False)
            return str(workload["metadata"]["name"])
        grouped = bool(gang) and podgroup.served(self.calls)
        if grouped:
            for labels in template_labels(workload):
                labels[podgroup.LABEL] = workload["metadata"]["name"]
        created = self._create_own(workload)
        if grouped and gang:
            self._create(podgroup.pod_group(created, gang))  # None: a retried launch made it
        return str(created["metadata"]["name"])

    def _own(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """A copy with this runtime's ownership labels, on the object and on the pods its
        operator will make (so the watch sees them); the rendered object stays untouched."""
        if manifest.get("kind") in _OPERATED:  # their pods' labels lie deep in the object
            obj: dict[str, Any] = orjson.loads(orjson.dumps(manifest))
        else:  # only its metadata and labels change: the rest is shared, not copied
            obj = dict(manifest)
            obj["metadata"] = dict(obj.get("metadata") or {})
            obj["metadata"]["labels"] = dict(obj["metadata"].get("labels") or {})
        meta = obj["metadata"]
        meta.setdefault("namespace", self.namespace)
        for labels in [meta.setdefault("labels", {}), *template_labels(obj)]:
            labels[names.MANAGED_BY] = names.MANAGER
            if self.instance:
                labels[names.INSTANCE] = self.instance
        return obj

    def _create(self, obj: dict[str, Any], answer: bool = True) -> dict[str, Any] | None:
        """``obj`` as the API server has it once created (``answer=False``: as sent);
        ``None`` where one of its name exists already. A retry of a create that was applied
        finds its own (409)."""
        what = f"creating {_word(obj)} {obj['metadata']['name']}"
        path = manifest_path(obj, self.namespace)
        try:
            created = self.calls.create(what, path, obj, answer)
        except ApiException as error:
            api_version, kind = obj["apiVersion"], obj["kind"]
            if error.status == 404 and (api_version, kind) in WORKLOADS:
                raise operators.missing(api_version, kind, self.namespace) from None
            raise self.calls.refused(what, error) from None
        if (obj["apiVersion"], obj["kind"]) in WORKLOADS:
            self.calls.note_served(obj["apiVersion"], path.rsplit("/", 1)[1])
        return created

    def _read(self, obj: dict[str, Any]) -> dict[str, Any]:
        """The object of ``obj``'s name as the API server has it."""
        what = f"reading {obj['kind']} {obj['metadata']['name']}"
        return self.calls.read(what, manifest_path(obj, self.namespace, named=True))

    def _create_own(self, workload: dict[str, Any], answer: bool = True) -> dict[str, Any]:
        """The run's pod (or MPIJob or SparkApplication, for its operator), as the API server
        has it (``answer=False``: as sent, when created now): created now, or by an earlier try
        of this attempt; one of another run's is a clash to report."""
        created = self._create(workload, answer)
        if created is not None:
            return created
        what, name = _word(workload), workload["metadata"]["name"]
        theirs = self._read(workload)
        mine = workload["metadata"]["labels"]
        found = (theirs.get("metadata") or {}).get("labels") or {}
        keys = [names.RUN_UID, names.ATTEMPT] + ([names.INSTANCE] if self.instance else [])
        if any(mine.get(key) != found.get(key) for key in keys):
            raise ConflictError(
                f"{what} {name}",
                f"already exists in namespace {self.namespace} and belongs to run "
                f"{found.get(names.RUN_UID, '(none)')!r} attempt "
                f"{found.get(names.ATTEMPT, '(none)')!r}, not to run {mine[names.RUN_UID]!r} "
                f"attempt {mine.get(names.ATTEMPT)!r}; delete it or use a new run uid",
            )
        log.info("%s %s already exists for this run attempt; not creating another", what, name)
        return theirs

    def _ensure_configmap(self, configmap: Mapping[str, Any]) -> None:
        """The bootstrap ConfigMap, created once per namespace and content: its name is its
        content's hash and it is immutable, so an existing one is already right. Copied (to
        be owned) only then: it is 70 KB, and copying it cost every run more than its pod."""
        name = configmap["metadata"]["name"]
        if name not in self._known_configmaps:
            self._create(self._own(configmap))
            self._known_configmaps.add(name)

    def _apply_secret(self, secret: dict[str, Any]) -> None:
        """Create, or refresh a Secret an earlier run of the same function created."""
        if self._create(secret) is not None:
            return
        name = secret["metadata"]["name"]
        labels = secret["metadata"]["labels"]
        theirs = (self._read(secret).get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != theirs.get(k) for k in (names.PROJECT, names.FUNCTION)):
            raise ConflictError(
                f"secret {name}",
                f"already exists in namespace {self.namespace} and runplane did not create it "
                "for this function; runplane will not overwrite it (use another secret name)",
            )
        try:
            self.calls.unread("PUT", manifest_path(secret, self.namespace, named=True), body=secret)
        except ApiException as error:
            raise self.calls.refused(f"updating secret {name}", error) from None


#: The kinds whose operator makes pods from templates inside them (:func:`template_labels`).
_OPERATED = ("MPIJob", "SparkApplication")


def _word(obj: Mapping[str, Any]) -> str:
    """How messages name the object's kind: the core kinds in lower case, as ``kubectl`` does."""
    kind = str(obj["kind"])
    return kind.lower() if kind in ("Pod", "Secret", "ConfigMap") else kind


def template_labels(obj: dict[str, Any]) -> list[dict[str, str]]:
    """The label maps of the pods an operator makes from ``obj``."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "MPIJob":
        return [
            replica["template"].setdefault("metadata", {}).setdefault("labels", {})
            for replica in spec["mpiReplicaSpecs"].values()
        ]
    if obj["kind"] == "SparkApplication":
        return [spec[role].setdefault("labels", {}) for role in ("driver", "executor")]
    return []

"""Creating a run's objects on the cluster, safe to repeat.

The pod name is deterministic per (run uid, attempt), so a create retried after a timeout, or
repeated after a crash, finds its own pod (409) instead of making a second one. A pod or Secret
of the same name that runplane did not make for this run is never taken over.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from runplane import names
from runplane.errors import ConflictError, InvalidValueError
from runplane.runtimes.kubernetes import podgroup
from runplane.runtimes.kubernetes.calls import Calls
from runplane.runtimes.kubernetes.rest import (
    WORKLOADS,
    collection_path,
    configmaps_path,
    object_path,
    pods_path,
    secrets_path,
)

log = logging.getLogger(__name__)


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

    def submit(
        self, manifests: Iterable[Mapping[str, Any]], gang: list[dict[str, Any]] | None = None
    ) -> str:
        """Create the run's ConfigMap and Secrets, then its workload; returns its name.

        ``gang``: the pod specs of a multi-pod workload, for a coscheduling ``PodGroup`` of
        all of them where the cluster serves one (:mod:`.podgroup`)."""
        owned = [self._own(manifest) for manifest in manifests]
        self.check(owned)
        for configmap in (m for m in owned if m["kind"] == "ConfigMap"):
            self._ensure_configmap(configmap)
        for secret in (m for m in owned if m["kind"] == "Secret"):
            self._apply_secret(secret)
        (workload,) = (m for m in owned if m["kind"] not in ("Secret", "ConfigMap"))
        if workload["kind"] == "Pod":
            return self._create_pod(workload)
        grouped = bool(gang) and podgroup.served(self.calls)
        if grouped:
            for labels in template_labels(workload):
                labels[podgroup.LABEL] = workload["metadata"]["name"]
        created = self._create_workload(workload)
        if grouped and gang:
            self._create_pod_group(podgroup.pod_group(created, gang))
        return str(created["metadata"]["name"])

    def _create_pod_group(self, group: dict[str, Any]) -> None:
        name = group["metadata"]["name"]
        try:
            self.calls.retried(
                f"creating PodGroup {name}",
                lambda: self._post(podgroup.path(self.namespace), group),
            )
        except ApiException as error:
            if error.status != 409:  # 409: a retried launch made it already
                raise self.calls.refused(f"creating PodGroup {name}", error) from None

    def _own(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """A copy with this runtime's ownership labels, on the object and on the pods its
        operator will make (so the watch sees them); the rendered object stays untouched."""
        obj: dict[str, Any] = json.loads(json.dumps(manifest))
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", self.namespace)
        for labels in [meta.setdefault("labels", {}), *template_labels(obj)]:
            labels[names.MANAGED_BY] = names.MANAGER
            if self.instance:
                labels[names.INSTANCE] = self.instance
        return obj

    def _create_workload(self, workload: dict[str, Any]) -> dict[str, Any]:
        """An MPIJob or SparkApplication, for its operator, as the API server has it; a retry
        finds its own (409)."""
        name: str = workload["metadata"]["name"]
        api_version, kind = workload["apiVersion"], workload["kind"]
        path = collection_path(api_version, kind, self.namespace)
        try:
            return self.calls.retried(f"creating {kind} {name}", lambda: self._post(path, workload))
        except ApiException as error:
            if error.status == 404:
                raise InvalidValueError(
                    "kind",
                    f"{api_version} {kind}",
                    f"the cluster does not serve {kind} ({api_version}): install its operator "
                    "(and CRD), or set mpijob_api_version to the version it serves",
                    "kubectl get crd mpijobs.kubeflow.org",
                ) from None
            if error.status != 409:
                raise self.calls.refused(f"creating {kind} {name}", error) from None
            theirs = self.calls.checked(
                f"reading {kind} {name}",
                lambda: self.calls.rest.json(
                    "GET",
                    object_path(api_version, kind, self.namespace, name),
                    timeout=self.calls.timeout,
                ),
            )
            self._check_same_run(kind, workload, theirs)
        return theirs

    def _check_same_run(self, what: str, mine: dict[str, Any], theirs: dict[str, Any]) -> None:
        name = mine["metadata"]["name"]
        ours = mine["metadata"]["labels"]
        found = (theirs.get("metadata") or {}).get("labels") or {}
        keys = [names.RUN_UID, names.ATTEMPT] + ([names.INSTANCE] if self.instance else [])
        if any(ours.get(key) != found.get(key) for key in keys):
            raise ConflictError(
                f"{what} {name}",
                f"already exists in namespace {self.namespace} and belongs to run "
                f"{found.get(names.RUN_UID, '(none)')!r}, not to run {ours[names.RUN_UID]!r}; "
                "delete it or use a new run uid",
            )
        log.info("%s %s already exists for this run attempt; not creating another", what, name)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.calls.rest.json("POST", path, body=body, timeout=self.calls.timeout)

    def _read(self, kind: str, name: str) -> dict[str, Any]:
        path = (pods_path if kind == "Pod" else secrets_path)(self.namespace, name)
        return self.calls.checked(
            f"reading {kind} {name}",
            lambda: self.calls.rest.json("GET", path, timeout=self.calls.timeout),
        )

    def _create_pod(self, pod: dict[str, Any]) -> str:
        name: str = pod["metadata"]["name"]
        try:
            self.calls.retried(
                f"creating pod {name}", lambda: self._post(pods_path(self.namespace), pod)
            )
        except ApiException as error:
            if error.status != 409:
                raise self.calls.refused(f"creating pod {name}", error) from None
            self._adopt(pod)
        return name

    def _adopt(self, pod: dict[str, Any]) -> None:
        """A pod of that name exists: ours from an earlier try, or a clash to report."""
        name = pod["metadata"]["name"]
        mine = pod["metadata"]["labels"]
        theirs = (self._read("Pod", name).get("metadata") or {}).get("labels") or {}
        keys = [names.RUN_UID, names.ATTEMPT] + ([names.INSTANCE] if self.instance else [])
        if any(mine.get(key) != theirs.get(key) for key in keys):
            raise ConflictError(
                f"pod {name}",
                f"already exists in namespace {self.namespace} and belongs to run "
                f"{theirs.get(names.RUN_UID, '(none)')!r} attempt "
                f"{theirs.get(names.ATTEMPT, '(none)')!r}, not to run {mine[names.RUN_UID]!r} "
                f"attempt {mine.get(names.ATTEMPT)!r}; delete it or use a new run uid",
            )
        log.info("pod %s already exists for this run attempt; not creating another", name)

    def _ensure_configmap(self, configmap: dict[str, Any]) -> None:
        """The bootstrap ConfigMap, created once per namespace and content: its name is its
        content's hash and it is immutable, so an existing one is already right."""
        name = configmap["metadata"]["name"]
        if name in self._known_configmaps:
            return
        try:
            self.calls.retried(
                f"creating configmap {name}",
                lambda: self._post(configmaps_path(self.namespace), configmap),
            )
        except ApiException as error:
            if error.status != 409:
                raise self.calls.refused(f"creating configmap {name}", error) from None
        self._known_configmaps.add(name)

    def _apply_secret(self, secret: dict[str, Any]) -> None:
        """Create, or refresh a Secret an earlier run of the same function created."""
        name = secret["metadata"]["name"]
        try:
            self.calls.retried(
                f"creating secret {name}", lambda: self._post(secrets_path(self.namespace), secret)
            )
            return
        except ApiException as error:
            if error.status != 409:
                raise self.calls.refused(f"creating secret {name}", error) from None
        labels = secret["metadata"]["labels"]
        theirs = (self._read("Secret", name).get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != theirs.get(k) for k in (names.PROJECT, names.FUNCTION)):
            raise ConflictError(
                f"secret {name}",
                f"already exists in namespace {self.namespace} and runplane did not create it "
                "for this function; runplane will not overwrite it (use another secret name)",
            )
        try:
            self.calls.rest.json(
                "PUT",
                secrets_path(self.namespace, name),
                body=secret,
                timeout=self.calls.timeout,
            )
        except ApiException as error:
            raise self.calls.refused(f"updating secret {name}", error) from None


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

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
from runplane.runtimes.kubernetes.calls import Calls
from runplane.runtimes.kubernetes.rest import configmaps_path, pods_path, secrets_path

log = logging.getLogger(__name__)


class Submitter:
    """Creates runs' pods and Secrets in one namespace, labelled as this runtime's."""

    def __init__(self, calls: Calls, instance: str | None) -> None:
        self.calls = calls
        self.namespace = calls.namespace
        self.instance = instance
        self._known_configmaps: set[str] = set()

    def check(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        """A run is one Pod, named and labelled per attempt, and the Secrets and the
        bootstrap ConfigMap it needs."""
        pods = []
        for manifest in manifests:
            kind = manifest.get("kind")
            if kind in ("MPIJob", "SparkApplication", "DaskCluster"):
                raise InvalidValueError(
                    "kind",
                    kind,
                    f"runs of a {kind} are not submitted by the Kubernetes runtime yet (it "
                    "submits Pods); render it with `runplane render` and apply it where its "
                    "operator runs, or run it on the embedded default",
                    "runplane render train.py --kind mpijob | kubectl apply -f -",
                )
            if kind not in ("Pod", "Secret", "ConfigMap"):
                raise InvalidValueError(
                    "kind",
                    kind,
                    "the Kubernetes runtime runs jobs: a rendered Pod, its Secrets and "
                    "runplane's bootstrap ConfigMap",
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
            if kind == "Pod":
                pods.append(manifest)
        if len(pods) != 1 or not pods[0]["metadata"].get("labels", {}).get(names.RUN_UID):
            raise InvalidValueError(
                "manifests",
                [m.get("kind") for m in pods],
                "a run is one Pod, rendered with a run reference so it is named and labelled "
                "per attempt",
                "build_request(fn, settings, uid=...)",
            )

    def submit(self, manifests: Iterable[Mapping[str, Any]]) -> str:
        """Create the run's ConfigMap and Secrets, then its pod; returns the pod's name."""
        owned = [self._own(manifest) for manifest in manifests]
        self.check(owned)
        for configmap in (m for m in owned if m["kind"] == "ConfigMap"):
            self._ensure_configmap(configmap)
        for secret in (m for m in owned if m["kind"] == "Secret"):
            self._apply_secret(secret)
        (pod,) = (m for m in owned if m["kind"] == "Pod")
        return self._create_pod(pod)

    def _own(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """A copy with this runtime's ownership labels; the rendered object stays untouched."""
        obj: dict[str, Any] = json.loads(json.dumps(manifest))
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", self.namespace)
        labels = meta.setdefault("labels", {})
        labels[names.MANAGED_BY] = names.MANAGER
        if self.instance:
            labels[names.INSTANCE] = self.instance
        return obj

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

"""The Kubernetes runtime: rendered pods go to the API server; pod changes come back as events.

Same shape as the local runtime: ``submit`` a rendered run, events out through a listener,
``abort`` by run uid. The runtime keeps almost no state of its own. The pod name is
deterministic per (run uid, attempt), so a create retried after a timeout finds its own pod
(409) instead of making a second one; an abort is written onto the pod as an annotation before
the delete, so whoever watches (this process, another replica, this process after a restart)
reports ``aborted`` rather than a failure. One watch thread per runtime delivers the events;
``submit`` and ``abort`` block the caller's thread (an async service calls them through
``asyncio.to_thread``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runplane.config import Settings
from runplane.errors import ConflictError, InvalidValueError, RunplaneError
from runplane.render import Rendered
from runplane.runtimes.base import RunRequest
from runplane.runtimes.events import Listener, RunEvent, RunState
from runplane.runtimes.kubernetes import names
from runplane.runtimes.kubernetes.client import api_client
from runplane.runtimes.kubernetes.pod_events import POD_DELETED, pod_to_event
from runplane.runtimes.kubernetes.rest import (
    APPLY_PATCH,
    MERGE_PATCH,
    RestApi,
    object_path,
    pods_path,
    secrets_path,
)
from runplane.runtimes.kubernetes.watch import DELETED, VANISHED, Backoff, PodWatch

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Answers worth retrying: the request may not have been applied, and trying again is safe.
TRANSIENT = frozenset({429, 500, 502, 503, 504})
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class ClusterError(RunplaneError):
    """The cluster refused or failed a request (RBAC, quota, admission, unreachable)."""

    http_status = 502


def _api_message(error: ApiException) -> str:
    try:
        body = json.loads(error.body or "")
        return str(body.get("message") or error.reason)
    except (ValueError, AttributeError):
        return str(error.reason)


class KubernetesRuntime:
    """Runs rendered pods on a cluster, in ``settings.namespace``.

    ``instance`` labels every pod this runtime creates and narrows its watch to them, so
    several runplane services (or test sessions) can share a namespace. ``resource_version``
    resumes the watch from a version saved earlier instead of re-listing.
    """

    def __init__(
        self,
        settings: Settings,
        listener: Listener,
        *,
        api: client.ApiClient | None = None,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        instance: str | None = None,
        grace_period_seconds: int | None = None,
        request_timeout: float = 30.0,
        submit_attempts: int = 4,
        watch: bool = True,
        resource_version: str | None = None,
    ) -> None:
        self.namespace = settings.namespace
        self.instance = instance
        self._api = api or api_client(kubeconfig, context)
        self._rest = RestApi(self._api)
        self._listener = listener
        self._grace = grace_period_seconds
        self._timeout = request_timeout
        self._attempts = max(submit_attempts, 1)
        self._backoff = Backoff(initial=0.2, maximum=5.0)
        self._lock = threading.Lock()
        self._last: dict[str, tuple[Any, ...]] = {}
        self._finished: set[str] = set()
        self._aborting: dict[str, tuple[str, str]] = {}
        self.watch = PodWatch(
            self._api,
            self.namespace,
            self.selector(),
            self._observe,
            resource_version=resource_version,
        )
        if watch:
            self.watch.start()

    def selector(self, uid: str | None = None) -> str:
        """The label selector of this runtime's pods, or of one run's."""
        parts = [f"{names.RUN_UID}={uid}" if uid else names.RUN_UID]
        if self.instance:
            parts.append(f"{names.INSTANCE}={self.instance}")
        return ",".join(parts)

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.watch.wait_synced(timeout)

    def close(self) -> None:
        """Stop watching. Pods keep running: they belong to the cluster, not to this process."""
        self.watch.stop()

    # -- submitting -----------------------------------------------------------------------

    def prepare(self, request: RunRequest) -> list[dict[str, Any]]:
        """The run's manifests, with what the pod's entry point needs beyond the rendering:
        parameters, inputs and the code's file name, as environment variables."""
        manifests = [json.loads(json.dumps(m)) for m in request.manifests]
        extra = {
            "RUNPLANE_PARAMS": json.dumps(request.params),
            "RUNPLANE_INPUTS": json.dumps(request.inputs),
            "RUNPLANE_FILENAME": request.filename,
        }
        for manifest in manifests:
            if manifest.get("kind") != "Pod":
                continue
            container = manifest["spec"]["containers"][0]
            env = container.setdefault("env", [])
            taken = {item["name"] for item in env}
            env.extend({"name": k, "value": v} for k, v in extra.items() if k not in taken)
        return manifests

    def submit(self, rendered: Rendered | Iterable[Mapping[str, Any]]) -> list[str]:
        """Create the run's Secrets, then its pods; returns the pod names.

        Safe to call again with the same rendered run: an existing pod of the same run attempt
        counts as created.
        """
        manifests = rendered.manifests if isinstance(rendered, Rendered) else list(rendered)
        pods: list[dict[str, Any]] = []
        secrets: list[dict[str, Any]] = []
        for manifest in manifests:
            kind = manifest.get("kind")
            if kind not in ("Pod", "Secret"):
                raise InvalidValueError(
                    "kind",
                    kind,
                    "the Kubernetes runtime runs jobs: a rendered Pod and its Secrets",
                    "runplane.new_function('train', kind='job')",
                )
            (pods if kind == "Pod" else secrets).append(self._own(manifest))
        if not pods:
            raise InvalidValueError("manifests", [], "a rendered job has a Pod")
        for pod in pods:
            if not pod["metadata"].get("labels", {}).get(names.RUN_UID):
                raise InvalidValueError(
                    "run",
                    None,
                    "render with a run reference so the pod is named and labelled per attempt",
                    "render(fn, settings, run=RunRef(uid, attempt=1))",
                )
        for secret in secrets:
            self._apply_secret(secret)
        return [self._create_pod(pod) for pod in pods]

    def _own(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """A copy with this runtime's ownership labels; render's output stays untouched."""
        obj: dict[str, Any] = json.loads(json.dumps(manifest))
        meta = obj.setdefault("metadata", {})
        namespace = meta.setdefault("namespace", self.namespace)
        if namespace != self.namespace:
            raise ConflictError(
                "metadata.namespace",
                f"{meta.get('name')!r} was rendered for namespace {namespace!r}, but this "
                f"runtime runs in {self.namespace!r}; render with the runtime's settings",
            )
        labels = meta.setdefault("labels", {})
        labels[names.MANAGED_BY] = names.MANAGER
        if self.instance:
            labels[names.INSTANCE] = self.instance
        return obj

    def _call(self, what: str, request: Callable[[], T]) -> T:
        """Run ``request``, retrying answers that may not have been applied.

        Only requests whose repetition is harmless come here: creates of deterministic names
        (a repeat answers 409) and reads.
        """
        for attempt in range(1, self._attempts + 1):
            try:
                return request()
            except ApiException as error:
                if error.status not in TRANSIENT or attempt == self._attempts:
                    raise
                cause = f"HTTP {error.status}"
            except (urllib3.exceptions.HTTPError, OSError) as error:
                if attempt == self._attempts:
                    raise ClusterError(f"kubernetes: {what}: {error}") from None
                cause = type(error).__name__
            delay = self._backoff.delay(attempt)
            log.info("%s: %s; retrying in %.1fs", what, cause, delay)
            time.sleep(delay)
        raise AssertionError("unreachable")

    def _create_pod(self, pod: dict[str, Any]) -> str:
        name: str = pod["metadata"]["name"]
        try:
            self._call(
                f"creating pod {name}",
                lambda: self._rest.json(
                    "POST", pods_path(self.namespace), body=pod, timeout=self._timeout
                ),
            )
        except ApiException as error:
            if error.status != 409:
                raise ClusterError(
                    f"kubernetes: creating pod {name} in {self.namespace}: HTTP {error.status}: "
                    f"{_api_message(error)}"
                ) from None
            self._adopt(pod)
        return name

    def _read(self, kind: str, name: str) -> dict[str, Any]:
        path = (pods_path if kind == "Pod" else secrets_path)(self.namespace, name)
        return self._checked(
            f"reading {kind} {name}", lambda: self._rest.json("GET", path, timeout=self._timeout)
        )

    def _checked(self, what: str, request: Callable[[], T]) -> T:
        """``_call``, with the API's refusals in runplane's error hierarchy."""
        try:
            return self._call(what, request)
        except ApiException as error:
            raise ClusterError(
                f"kubernetes: {what} in {self.namespace}: HTTP {error.status}: "
                f"{_api_message(error)}"
            ) from None

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

    def _apply_secret(self, secret: dict[str, Any]) -> None:
        """Create, or refresh a Secret an earlier run of the same function created."""
        name = secret["metadata"]["name"]
        try:
            self._call(
                f"creating secret {name}",
                lambda: self._rest.json(
                    "POST", secrets_path(self.namespace), body=secret, timeout=self._timeout
                ),
            )
            return
        except ApiException as error:
            if error.status != 409:
                raise ClusterError(
                    f"kubernetes: creating secret {name} in {self.namespace}: "
                    f"HTTP {error.status}: {_api_message(error)}"
                ) from None
        labels = secret["metadata"]["labels"]
        theirs = (self._read("Secret", name).get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != theirs.get(k) for k in (names.PROJECT, names.FUNCTION)):
            raise ConflictError(
                f"secret {name}",
                f"already exists in namespace {self.namespace} and runplane did not create it "
                "for this function; runplane will not overwrite it (use another secret name)",
            )
        try:
            self._rest.json(
                "PUT", secrets_path(self.namespace, name), body=secret, timeout=self._timeout
            )
        except ApiException as error:
            raise ClusterError(
                f"kubernetes: updating secret {name}: HTTP {error.status}: {_api_message(error)}"
            ) from None

    # -- the cluster --------------------------------------------------------------------

    def node_summary(self) -> list[dict[str, Any]]:
        """Nodes with their group, labels, taints, allocatable and free capacity (allocatable
        less the requests of every pod not finished on the node, in placement's units)."""
        from runplane.placement import Node, pod_requests

        nodes = self._checked(
            "listing nodes", lambda: self._rest.json("GET", "/api/v1/nodes", timeout=self._timeout)
        )
        pods = self._checked(
            "listing pods",
            lambda: self._rest.json(
                "GET",
                "/api/v1/pods",
                {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
                timeout=self._timeout,
            ),
        )
        summary = {}
        for item in nodes.get("items") or []:
            node = Node.from_kubernetes(item)
            summary[node.name] = node
        for pod in pods.get("items") or []:
            host = summary.get(pod.get("spec", {}).get("nodeName", ""))
            if host is not None:
                host.reserve(pod_requests(pod["spec"]))
        return [
            {
                "name": n.name,
                "group": n.labels.get("runplane.io/node-group", ""),
                "labels": n.labels,
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in n.taints],
                "allocatable": n.allocatable,
                "free": {k: n.free(k) for k in n.allocatable}
                | {"pods": n.allocatable.get("pods", 0) - n.pod_count},
            }
            for n in summary.values()
        ]

    # -- deploying (serving) ---------------------------------------------------------------

    def apply(self, manifests: Iterable[Mapping[str, Any]]) -> list[str]:
        """Create or update objects with server-side apply (field manager ``runplane``).

        Applying the same manifests again changes nothing; a serving function rendered
        without autoscaling removes the HorizontalPodAutoscaler an earlier deploy made, so a
        deploy leaves exactly what the function now says.
        """
        applied: list[str] = []
        kinds: set[tuple[str, str]] = set()
        name = ""
        for manifest in manifests:
            meta = manifest["metadata"]
            namespace = meta.get("namespace", self.namespace)
            path = object_path(manifest["apiVersion"], manifest["kind"], namespace, meta["name"])
            body = json.dumps(manifest)
            self._checked(
                f"applying {manifest['kind']} {meta['name']}",
                lambda path=path, body=body: self._rest.json(  # type: ignore[misc]
                    "PATCH",
                    path,
                    {"fieldManager": "runplane", "force": "true"},
                    body=body,
                    content_type=APPLY_PATCH,
                    timeout=self._timeout,
                ),
            )
            applied.append(f"{manifest['kind']}/{meta['name']}")
            kinds.add((manifest["apiVersion"], manifest["kind"]))
            if manifest["kind"] == "Deployment":
                name = meta["name"]
        hpa = ("autoscaling/v2", "HorizontalPodAutoscaler")
        if name and hpa not in kinds:
            path = object_path(*hpa, self.namespace, name)
            try:
                self._rest.json("DELETE", path, timeout=self._timeout)
            except ApiException as error:
                if error.status != 404:
                    raise ClusterError(
                        f"removing the autoscaler of {name}: {_api_message(error)}"
                    ) from None
        return applied

    # -- aborting -------------------------------------------------------------------------

    def pods(self, uid: str) -> list[dict[str, Any]]:
        """The run's pods as the API has them now (every attempt)."""
        found = self._checked(
            f"listing pods of run {uid}",
            lambda: self._rest.json(
                "GET",
                pods_path(self.namespace),
                {"labelSelector": self.selector(uid)},
                timeout=self._timeout,
            ),
        )
        items: list[dict[str, Any]] = found.get("items") or []
        return items

    def logs(self, uid: str) -> str:
        """The output of the run's newest pod, as the kubelet keeps it ("" when it has none
        yet, or the node is gone)."""
        pods = sorted(self.pods(uid), key=lambda pod: pod["metadata"].get("creationTimestamp", ""))
        if not pods:
            return ""
        path = pods_path(self.namespace, pods[-1]["metadata"]["name"]) + "/log"
        try:
            response = self._rest._send("GET", path, timeout=self._timeout)
            response.read()
            return bytes(response.data or b"").decode("utf-8", errors="replace")
        except (ApiException, urllib3.exceptions.HTTPError):
            return ""

    def pods_by_run(self) -> dict[str, list[dict[str, Any]]]:
        """Every pod of this runtime's runs, by run uid, as the API has them now."""
        found = self._checked(
            "listing run pods",
            lambda: self._rest.json(
                "GET",
                pods_path(self.namespace),
                {"labelSelector": self.selector()},
                timeout=self._timeout,
            ),
        )
        runs: dict[str, list[dict[str, Any]]] = {}
        for pod in found.get("items") or []:
            uid = (pod.get("metadata", {}).get("labels") or {}).get(names.RUN_UID, "")
            runs.setdefault(uid, []).append(pod)
        return runs

    def holds(self, uid: str) -> bool:
        """True while the run has a pod that has not finished."""
        return any(_live(pod) for pod in self.pods(uid))

    def abort(self, uid: str, reason: str = "Aborted", message: str = "") -> bool:
        """Delete the run's unfinished pods; ``False`` if it has none.

        The run is reported ``aborting`` now and ``aborted`` once its pod has stopped.
        """
        live = [pod for pod in self.pods(uid) if _live(pod)]
        if not live:
            return False
        with self._lock:
            self._aborting[uid] = (reason, message)
        notes = {names.ABORT_REASON: reason, names.ABORT_MESSAGE: message}
        for pod in live:
            meta = pod["metadata"]
            # The uid precondition: never touch a newer pod that took the same name.
            patch = {"metadata": {"uid": meta["uid"], "annotations": notes}}
            if self._on_pod("PATCH", meta["name"], patch, MERGE_PATCH):
                meta.setdefault("annotations", {}).update(notes)
                self._deliver(meta["uid"], pod_to_event(pod))
        for pod in live:
            meta = pod["metadata"]
            options: dict[str, Any] = {"preconditions": {"uid": meta["uid"]}}
            if self._grace is not None:
                options["gracePeriodSeconds"] = self._grace
            self._on_pod("DELETE", meta["name"], options)
        return True

    def _on_pod(
        self, method: str, name: str, body: dict[str, Any], content_type: str = "application/json"
    ) -> bool:
        """Patch or delete one pod; False if it is already gone (or was replaced)."""
        try:
            self._rest.json(
                method,
                pods_path(self.namespace, name),
                body=body,
                content_type=content_type,
                timeout=self._timeout,
            )
            return True
        except ApiException as error:
            if error.status in (404, 409, 422):  # 409/422: the uid precondition failed
                return False
            raise ClusterError(
                f"kubernetes: aborting: HTTP {error.status}: {_api_message(error)}"
            ) from None

    # -- events ---------------------------------------------------------------------------

    def _observe(self, kind: str, pod: dict[str, Any]) -> None:
        key = str((pod.get("metadata") or {}).get("uid") or "")
        gone = kind in (DELETED, VANISHED)
        event = pod_to_event(pod, deleted=gone)
        if kind == VANISHED and event is not None and event.reason == POD_DELETED:
            event = replace(
                event,
                message=f"pod {pod['metadata'].get('name')} was deleted while runplane was not "
                "watching; how the run ended is unknown",
            )
        self._deliver(key, event, forget=gone)

    def _deliver(self, key: str, event: RunEvent | None, forget: bool = False) -> None:
        """Pass on an event unless it repeats the pod's last one or follows its end.

        The listener is called without the lock held: it may call back into ``abort``.
        """
        if event is None:
            return
        with self._lock:
            event = self._as_aborted(event)
            signature = (event.state, event.condition, event.reason, event.message, event.node)
            fresh = key not in self._finished and self._last.get(key) != signature
            if fresh:
                self._last[key] = signature
                if event.state.terminal:
                    self._finished.add(key)
                    self._aborting.pop(event.uid, None)
            if forget:
                self._last.pop(key, None)
                self._finished.discard(key)
        if not fresh:
            return
        try:
            self._listener(event)
        except Exception:  # the watch must go on for the other runs
            log.exception("run event listener failed on %s", event)

    def _as_aborted(self, event: RunEvent) -> RunEvent:
        """While this runtime aborts a run, whatever its pod does is part of the abort (also
        when the annotation could not be written)."""
        wanted = self._aborting.get(event.uid)
        if wanted is None or event.state in (RunState.ABORTING, RunState.ABORTED):
            return event
        state = RunState.ABORTED if event.state.terminal else RunState.ABORTING
        return RunEvent(
            uid=event.uid,
            state=state,
            reason=wanted[0],
            message=wanted[1],
            attempt=event.attempt,
            node=event.node,
            exit_code=event.exit_code if state is RunState.ABORTED else None,
            at=event.at,
        )


def _live(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES

"""The Kubernetes runtime: a run's pod goes to the API server, pod changes come back as events.

The runtime keeps almost no state of its own; the cluster is the truth. Submission is safe to
repeat (:mod:`.submit`); the watch (:mod:`.watch`) reports every pod of this runtime's runs,
:mod:`.tracker` turns its observations into run events, and :mod:`.logspool` copies each pod's
output into its run's directory before the run is reported ended. An abort is written onto the pod
as an annotation before the delete, so whoever watches (this process, another replica, this
process after a restart) records ``aborted`` rather than a failure. Calls block the caller's
thread (an async service calls them through ``asyncio.to_thread``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runplane import names
from runplane.config import Settings
from runplane.errors import RunplaneError
from runplane.placement import NodeSummary
from runplane.placement.quotas import QuotaTable
from runplane.rendering.workloads import gang_pod_specs
from runplane.runs import ResizeRecord, RunState, Usage
from runplane.runtimes.contract import Answer, Call, Capabilities, RunRequest
from runplane.runtimes.events import EventChannel, RunEvent
from runplane.runtimes.kubernetes import applications, autoresize, cluster, deploy, mpijobs, views
from runplane.runtimes.kubernetes.api.calls import Calls, ClusterError
from runplane.runtimes.kubernetes.api.client import api_client, pooled
from runplane.runtimes.kubernetes.api.namespaces import ensure_namespace
from runplane.runtimes.kubernetes.api.rest import (
    BACKGROUND,
    JSON,
    MERGE_PATCH,
    RestApi,
    collection_path,
    object_path,
    pods_path,
)
from runplane.runtimes.kubernetes.api.watch import DELETED, MODIFIED, VANISHED, PodWatch
from runplane.runtimes.kubernetes.autoresize import RightSizer
from runplane.runtimes.kubernetes.gang import GangGate
from runplane.runtimes.kubernetes.kubelet_stats import KubeletStats
from runplane.runtimes.kubernetes.kueue import quota_terms
from runplane.runtimes.kubernetes.kueue_admission import KueueAdmission, detect
from runplane.runtimes.kubernetes.logspool import LogSpool, PodLog
from runplane.runtimes.kubernetes.nodes import NodeBook, label_node
from runplane.runtimes.kubernetes.pod_events import (
    attempt_of,
    kept,
    main_container,
    node_lost_event,
    pod_to_event,
)
from runplane.runtimes.kubernetes.resize import PodResizer
from runplane.runtimes.kubernetes.submit import WORKLOADS, Submitter
from runplane.runtimes.kubernetes.tracker import RunTracker
from runplane.runtimes.labelling import check_label_change

log = logging.getLogger(__name__)

#: Connections kept open to the API server: its two watches hold one each, and the rest serve
#: creations and aborts at once (a service aborts up to 32 runs together); a request beyond
#: them would open a connection, a TLS handshake, and drop it after one use.
_CONNECTIONS = 48

#: While the runs' pods change more often than this (seconds), their watch reads the changes
#: together, at most every this often: a change is seen up to this much later, and a busy
#: service spends less CPU per run, a twentieth at 50 ms and a little more at 100 ms
#: (docs/decisions.md).
POD_EVENTS_PACE = 0.1

#: How much longer than its grace period a retry waits for an earlier attempt's pod to stop,
#: and how often it looks (at the watch, not the API).
_STOP_MARGIN = 10.0
_STOP_POLL = 0.2


class KubernetesRuntime:
    """Runs rendered pods on a cluster, in ``settings.namespace``.

    ``instance`` labels every pod this runtime creates and narrows its watch to them, so
    several runplane services (or test sessions) can share a namespace. ``resource_version``
    resumes the watch from a version saved earlier instead of re-listing.

    Without ``observe`` it watches nothing until its events are first read (or what exists
    is asked): a replica that is not the leader serves clients with it and leaves pods and
    nodes to the leader's watch.
    """

    name = "kubernetes"
    capabilities = Capabilities(
        gpus=True, preemption=True, node_labels=True, deploy=True, durable=True
    )
    isolation = "each run is a pod: the kubelet's cgroups hold its limits and its processes"

    def __init__(
        self,
        settings: Settings,
        *,
        api: client.ApiClient | None = None,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        instance: str | None = None,
        grace_period_seconds: int | None = None,
        request_timeout: float = 30.0,
        submit_attempts: int = 4,
        resource_version: str | None = None,
        sync_timeout: float = 60.0,
        gang_interval: float = 5.0,
        log_follows: int = 64,
        observe: bool = True,
    ) -> None:
        self.namespace = settings.namespace
        self.instance = instance
        #: Every project's quotas, as the service last gave them (:meth:`apply_quotas`).
        self.quotas: QuotaTable = {}
        #: Projects whose queue Kueue or the API server refused: written again at the next change.
        self._unsynced: set[str] = set()
        self._service_port = settings.serving.service_port
        api = api or api_client(kubeconfig, context, pool=_CONNECTIONS)
        rest = RestApi(api)
        self._calls = Calls(rest, self.namespace, request_timeout, submit_attempts)
        ensure_namespace(self._calls)
        self._submitter = Submitter(self._calls, instance)
        self._grace = grace_period_seconds
        self._sync_timeout = sync_timeout
        self._events = EventChannel()
        self._tracker = RunTracker(self._publish, self._results_from_log)
        self._resizer = PodResizer(self._calls, self._pods, self._publish)
        self._nodes = NodeBook(settings.spot, self._node_lost)
        self._gang = GangGate(self._snapshot, self._admit, self._publish, gang_interval)
        self.node_watch = PodWatch(
            rest,
            self.namespace,
            "",
            self._observe_node,
            name="runplane-node-watch",
            path="/api/v1/nodes",
            views=views.NODES,
        )
        # Followed logs hold their connections for long: a pool of their own.
        spool_api = pooled(api.configuration, log_follows)
        self._spool = LogSpool(
            RestApi(spool_api),
            self.namespace,
            settings.local.home / "runs",
            cap=settings.retention.max_output_bytes,
            follows=log_follows,
        )
        self.watch = PodWatch(
            rest,
            self.namespace,
            self._selector(),
            self._observe,
            resource_version=resource_version,
            keep=kept,
            index=_run_uid,
            views=views.PODS,
            pace=POD_EVENTS_PACE,
        )
        self._rest = rest
        #: Kueue's queues, where the cluster runs Kueue and the settings allow it
        #: (:mod:`.kueue_admission`); runplane's gang placement otherwise.
        self.kueue = (
            KueueAdmission(self._calls, rest, settings, self._tracker.deliver, self.watch.get)
            if detect(self._calls, settings)
            else None
        )
        #: SparkApplications' own states, watched once the cluster serves them.
        self.application_watch: PodWatch | None = None
        #: MPIJobs' conditions, by API version, watched once the cluster serves them.
        self.mpijob_watches: dict[str, PodWatch] = {}
        self._mpijob_version: str = settings.mpijob_api_version
        self._stats = KubeletStats(self._node_summary, self._spool.serves)
        self._rightsizer = RightSizer(self._memory_now, self._resizer, self._publish)
        #: The pod each running run runs in now, and its node, for its usage.
        self._placed: dict[str, tuple[str, str]] = {}
        self._observing = threading.Lock()
        self._watching = False
        if observe:
            self._watch_cluster()

    def _watch_cluster(self) -> None:
        """Start the node and pod watches, once."""
        with self._observing:
            if not self._watching:
                self._watching = True
                self.node_watch.start()
                self.watch.start()
                if self.kueue is not None:
                    self.kueue.start()
        self._watch_applications()
        self._watch_mpijobs(self._mpijob_version)

    def _watch_applications(self) -> None:
        """Watch this runtime's SparkApplications, once, where the cluster serves them (their
        operator may be installed after the service starts: a spark run's launch asks again)."""
        plural = collection_path(applications.API_VERSION, applications.KIND, self.namespace)
        with self._observing:
            if self.application_watch is not None or not self._watching:
                return
            try:
                served = self._calls.serves(applications.API_VERSION, plural.rsplit("/", 1)[1])
            except ClusterError as error:
                log.info("SparkApplications not watched: %s", error)
                return
            if served:
                self.application_watch = PodWatch(
                    self._rest,
                    self.namespace,
                    self._selector(),
                    self._observe_application,
                    name="runplane-spark-watch",
                    path=plural,
                ).start()

    def _watch_mpijobs(self, api_version: str) -> None:
        """Watch this runtime's MPIJobs of ``api_version``, once, where the cluster serves
        them (:mod:`.mpijobs`: their runs' states are their operator's)."""
        plural = collection_path(api_version, mpijobs.KIND, self.namespace)
        with self._observing:
            if api_version in self.mpijob_watches or not self._watching:
                return
            try:
                served = self._calls.serves(api_version, plural.rsplit("/", 1)[1])
            except ClusterError as error:
                log.info("MPIJobs not watched: %s", error)
                return
            if served:
                self.mpijob_watches[api_version] = PodWatch(
                    self._rest,
                    self.namespace,
                    self._selector(),
                    self._observe_mpijob,
                    name="runplane-mpijob-watch",
                    path=plural,
                ).start()

    def _observe_mpijob(self, kind: str, mpijob: dict[str, Any]) -> None:
        labels = (mpijob.get("metadata") or {}).get("labels") or {}
        uid = labels.get(names.RUN_UID)
        if not uid:
            return
        if kind in (DELETED, VANISHED):
            self._tracker.operator_gone(uid, attempt_of(labels))
            return
        event = mpijobs.mpijob_event(mpijob)
        if event is None or not mpijobs.news(event):
            return
        if event.state.terminal:
            self._tracker.operator_ended(event)
        else:
            self._tracker.deliver(f"workload-{mpijob['metadata'].get('uid', uid)}", event)

    def _observe_application(self, kind: str, application: dict[str, Any]) -> None:
        if kind in (DELETED, VANISHED):
            return
        event = applications.application_event(application)
        if event is not None:
            key = f"workload-{(application.get('metadata') or {}).get('uid', event.uid)}"
            self._tracker.deliver(key, event)

    def _observe(self, kind: str, pod: dict[str, Any]) -> None:
        """The watch's news of a pod: its output copied as it comes, and all of it copied
        before its end becomes the run's."""
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        uid = labels.get(names.RUN_UID)
        if uid and _started(pod) and labels.get(names.ROLE) not in names.HELPER_ROLES:
            container, node = main_container(pod), pod["spec"].get("nodeName") or ""
            attempt = attempt_of(labels)
            if _finished(pod) or kind in (DELETED, VANISHED):
                self._spool.finish(uid, meta["name"], container, node, attempt)
                if self._placed.get(uid, ("", ""))[0] == meta["name"]:
                    self._placed.pop(uid, None)
                self._rightsizer.observe(uid, pod, False, attempt)
            else:
                self._spool.follow(uid, meta["name"], container, node, attempt)
                self._placed[uid] = (meta["name"], node)
                self._rightsizer.observe(uid, pod, True, attempt)
        self._tracker.observe(kind, pod)
        self._gang.wake()

    def _observe_node(self, kind: str, node: dict[str, Any]) -> None:
        self._nodes.observe(kind, node)
        self._gang.wake()

    def _publish(self, event: RunEvent) -> None:
        """Events leave with their node's group and whether it is spot."""
        if event.node and event.spot is None:
            group, spot = self._nodes.describe(event.node)
            event = event.on_node(group, spot)
        self._events.publish(event)

    def _node_lost(self, node: str, group: str, spot: bool | None) -> None:
        """A node was deleted: each unfinished run pod on it is deleted at once, with no grace
        (nothing should run it any more; a kubelet still alive behind the deleted Node stops
        it), and reported lost now: its retry need not wait for the cluster's pod collection.

        The delete is conditional on the pod being as read: a pod that ended in the meantime
        is reported as it ended, not lost, so a finished attempt is never run again.
        """
        for known in self._pods_on(node):
            try:
                self._lose(known, node, group, spot)
            except Exception:  # the others on the node still count
                log.warning("pod %s of lost node %s", known["metadata"]["name"], node)

    def _pods_on(self, node: str) -> list[dict[str, Any]]:
        """This runtime's pods bound to ``node``, as the API server lists them now: the pod
        watch may not have seen a pod's binding yet when the node watch sees its node go (the
        two streams are apart, and a busy pod watch reads at most every ``POD_EVENTS_PACE``).
        As the pod watch knows them if the list fails. A node is deleted rarely, and holds at
        most its pod capacity: one request, filtered by the API server."""
        try:
            listed = self._calls.json(
                "GET",
                pods_path(self.namespace),
                {"labelSelector": self._selector(), "fieldSelector": f"spec.nodeName={node}"},
            )
            return list(listed.get("items") or [])
        except Exception as error:  # an outage: what the watch saw is the best there is
            log.info("pods of lost node %s not listed (%s); as the watch saw them", node, error)
            return [p for p in self.watch.known() if (p.get("spec") or {}).get("nodeName") == node]

    def _lose(self, pod: dict[str, Any], node: str, group: str, spot: bool | None) -> None:
        for _ in range(3):
            pod = self._fresh(pod)
            if _finished(pod):  # it ended before its node went: that end is the truth
                self._observe(MODIFIED, pod)
                return
            event = node_lost_event(pod, node)
            if event is None:
                return
            meta = pod["metadata"]
            event = event.on_node(group, spot)
            preconditions = {"uid": meta["uid"]}
            if meta.get("resourceVersion"):
                preconditions["resourceVersion"] = meta["resourceVersion"]
            self._tracker.losing(meta["uid"], event)  # the watch may see the delete first
            try:
                self._calls.unread(
                    "DELETE",
                    pods_path(self.namespace, meta["name"]),
                    body={"gracePeriodSeconds": 0, "preconditions": preconditions},
                )
            except ApiException as error:
                if error.status == 409:  # it changed since it was read: read it again
                    self._tracker.losing(meta["uid"], None)
                    continue
                if error.status != 404:  # PodGC collects it later; it is lost all the same
                    log.info("pod %s of lost node %s not deleted: %s", meta["name"], node, error)
            self._tracker.lost(meta["uid"])
            return

    def _fresh(self, pod: dict[str, Any]) -> dict[str, Any]:
        """The pod as the API server has it now (the watch may lag by an event); as last seen
        if it is gone or cannot be read."""
        name = pod["metadata"]["name"]
        try:
            fresh = self._calls.json("GET", pods_path(self.namespace, name))
        except Exception:
            return pod
        same = (fresh.get("metadata") or {}).get("uid") == pod["metadata"].get("uid")
        return fresh if same else pod

    def _selector(self, uid: str | None = None) -> str:
        """The label selector of this runtime's pods, or of one run's."""
        parts = [f"{names.RUN_UID}={uid}" if uid else names.RUN_UID]
        if self.instance:
            parts.append(f"{names.INSTANCE}={self.instance}")
        return ",".join(parts)

    def close(self, grace: float = 0.0) -> None:
        """Stop watching. Pods keep running (``grace`` has nothing to wait for): they belong to
        the cluster, not to this process."""
        self._gang.close()
        self._rightsizer.close()
        self.watch.stop()
        if self.kueue is not None:
            self.kueue.stop()
        self.node_watch.stop()
        if self.application_watch is not None:
            self.application_watch.stop()
        for watch in self.mpijob_watches.values():
            watch.stop()
        self._spool.close()
        self._events.close()

    # -- launching ------------------------------------------------------------------------

    def check(self, request: RunRequest) -> None:
        """The run's objects as runplane makes them, and an operator's kind the cluster serves
        (else the run is refused now, naming the operator to install)."""
        self._submitter.check(request.manifests)
        self._submitter.check_served(request.manifests)

    def launch(self, request: RunRequest) -> None:
        """Create the run's Secrets and pod; safe to repeat for the same attempt. A run of
        several pods is created only when all of them fit at once, and held (``pending``)
        until then (:mod:`.gang`); where Kueue admits runs, it is created in its project's
        queue at once, and Kueue admits it whole (:mod:`.kueue_admission`)."""
        if request.attempt > 1:
            self._await_earlier_attempts(request)
        gang = gang_pod_specs(request.pod)
        if self.kueue is not None:  # Kueue admits it whole
            self._submitter.submit(self.kueue.queued(request.manifests))
        elif len(gang) > 1:
            self._gang.offer(request, gang)
        else:
            self._submitter.submit(request.manifests)
        if request.pod.get("kind") == applications.KIND:
            self._watch_applications()
        if request.pod.get("kind") == mpijobs.KIND:
            self._watch_mpijobs(str(request.pod.get("apiVersion")))

    def _await_earlier_attempts(self, request: RunRequest) -> None:
        """A retried attempt starts once the pods of the run's earlier attempts have stopped,
        as a Job's replacement waits for a terminating pod: an evicted or preempted pod may
        still be writing its checkpoint in its grace period, which the next attempt must find,
        and what it holds on its node is not free until it stops. Read from the watch, no
        request; waited for no longer than that grace period and a margin."""
        grace = request.pod_spec.get("terminationGracePeriodSeconds", 30)
        deadline = time.monotonic() + float(grace) + _STOP_MARGIN
        while time.monotonic() < deadline and any(
            attempt_of(pod["metadata"].get("labels") or {}) < request.attempt and not _finished(pod)
            for pod in self.watch.known_by(request.uid)
        ):
            time.sleep(_STOP_POLL)

    def _admit(self, request: RunRequest) -> None:
        self._submitter.submit(request.manifests, gang_pod_specs(request.pod))

    def held(self) -> list[str]:
        """Runs of several pods waiting here for room for all of them."""
        return self._gang.held()

    def deploy(self, manifests: Sequence[Mapping[str, Any]]) -> list[str]:
        if self.kueue is not None:
            manifests = self.kueue.queued(manifests)
        return deploy.apply(self._calls, manifests)

    def deployments(self) -> list[dict[str, Any]]:
        return deploy.listing(self._calls, self._service_port)

    def delete_deployment(self, project: str, name: str) -> str:
        return deploy.remove(self._calls, project, name)

    def invoke(self, project: str, name: str, call: Call) -> Answer:
        return deploy.forward(self._calls, name, self._service_port, call)

    # -- the cluster ----------------------------------------------------------------------

    def _list(self, what: str, path: str, query: Mapping[str, Any]) -> list[dict[str, Any]]:
        found = self._calls.read(what, path, query)
        items: list[dict[str, Any]] = found.get("items") or []
        return items

    def _pods(self, uid: str | None = None) -> list[dict[str, Any]]:
        """This runtime's pods (of one run, or of all), as the API has them now."""
        return self._list(
            f"listing pods of run {uid}" if uid else "listing run pods",
            pods_path(self.namespace),
            {"labelSelector": self._selector(uid)},
        )

    def nodes(self) -> list[NodeSummary]:
        return cluster.summarise(*self._snapshot())

    def _snapshot(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The cluster's nodes and its unfinished pods, now."""
        nodes = self._list("listing nodes", "/api/v1/nodes", {})
        pods = self._list(
            "listing pods",
            "/api/v1/pods",
            {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
        )
        return nodes, pods

    def apply_quotas(self, quotas: QuotaTable) -> None:
        """Project quotas become the cluster's queues where Kueue runs; without it, a cluster
        has nothing that holds them, and runs are admitted as before. A project whose quota
        was cleared gets an unlimited queue back. A queue Kueue or the API server refuses is
        logged and the others still applied: the service must start, and the next change
        tries again. Only the projects whose quota changed (or failed before) are written:
        an admin's change of one project costs two requests, not two per project."""
        previous, self.quotas = self.quotas, dict(quotas)
        if self.kueue is None:
            return
        changed = {p for p in set(previous) | set(self.quotas) if previous.get(p) != quotas.get(p)}
        failed, self._unsynced = self._unsynced, set()
        for project in sorted(changed | failed):
            quota = self.quotas.get(project)
            try:
                self.kueue.sync_project_queue(project, quota_terms(quota) if quota else None)
            except RunplaneError as error:  # refused, or a name Kueue cannot take
                self._unsynced.add(project)
                log.warning("project %s's quota is not in Kueue: %s", project, error)

    def label_node(self, name: str, labels: Mapping[str, str | None]) -> dict[str, str]:
        """Patch the Node object's labels: the scheduler places pods on them at once."""
        return label_node(self._calls, name, check_label_change("labels", labels))

    def end_left(self, uid: str, attempt: int) -> RunEvent | None:
        """Nothing: a cluster's runs outlive the service, and their ends arrive as events of
        the watch that starts again."""
        return None

    def watching(self) -> str | None:
        """The pod watch is what reports runs' changes: it must run, have listed the
        namespace's pods once, and not be failing now. (The node watch is not asked: a
        service allowed no cluster-wide read of nodes still sees its runs.)"""
        return self.watch.trouble()

    def existing(self) -> dict[str, list[str]]:
        """Pod names by run uid, once the watch has reported every pod that existed when it
        began (so events of runs that finished meanwhile are already on their way); as the
        API has them if the watch could not list in time."""
        self._watch_cluster()
        synced = self.watch.wait_synced(self._sync_timeout)
        runs: dict[str, list[str]] = {}
        # Once synced, the watch knows every pod: listing them all again would read each
        # whole (ten thousand pods are a hundred megabytes) to learn their names.
        for pod in self.watch.known() if synced else self._pods():
            meta = pod.get("metadata") or {}
            uid = (meta.get("labels") or {}).get(names.RUN_UID, "")
            runs.setdefault(uid, []).append(meta.get("name", ""))
        for kind, workload in self._workloads():
            meta = workload.get("metadata") or {}
            uid = (meta.get("labels") or {}).get(names.RUN_UID, "")
            runs.setdefault(uid, []).append(f"{kind}/{meta.get('name', '')}")
        return runs

    def _workloads(self, uid: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        """This runtime's MPIJobs and SparkApplications (of one run, or of all); a kind the
        cluster does not serve has none."""
        found = []
        for api_version, kind in WORKLOADS:
            path = collection_path(api_version, kind, self.namespace)
            if not self._calls.serves(api_version, path.rsplit("/", 1)[1]):
                continue  # its operator is not installed: nothing to list, no request
            query = {"labelSelector": self._selector(uid)}
            try:
                answer = self._calls.json("GET", path, query)
            except ApiException as error:
                if error.status in (403, 404):  # not installed, or not ours to list
                    continue
                raise self._calls.refused(f"listing {kind}s", error) from None
            found += [(kind, item) for item in answer.get("items") or []]
        return found

    # -- observing ------------------------------------------------------------------------

    def events(self) -> EventChannel:
        self._watch_cluster()
        return self._events

    def logs(self, uid: str, offset: int = 0) -> tuple[bytes, int]:
        """The run's output as copied from its pods so far (:mod:`.logspool`). A replica that
        does not watch (it does not lead) copies it from the pods' logs now, as the leader's
        spool does as they are written: it answers the same bytes, for ended runs too while
        their pods exist."""
        if not self._watching:
            self._spool.catch_up(uid, self._pod_logs(uid))
        return self._spool.read(uid, offset)

    def _pod_logs(self, uid: str) -> list[PodLog]:
        """The run's pods whose container started, as a catch-up reads them; none when the
        API cannot list them (the copy made so far is answered)."""
        try:
            pods = self._pods(uid)
        except ClusterError as error:
            log.debug("listing the pods of run %s: %s", uid, error)
            return []
        return [
            PodLog(
                pod["metadata"]["name"],
                main_container(pod),
                pod["spec"].get("nodeName") or "",
                attempt_of(pod["metadata"].get("labels") or {}),
                _finished(pod),
            )
            for pod in pods
            if _started(pod)
            and (pod["metadata"].get("labels") or {}).get(names.ROLE) not in names.HELPER_ROLES
        ]

    def _results_from_log(
        self, pod: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        """A finished pod's report from the last line of its output, where the bootstrap puts
        it when too large for the termination message, and an mpijob's launcher always."""
        uid = pod["metadata"]["labels"][names.RUN_UID]
        report = self._spool.results(uid)
        if report is None:
            raise LookupError(f"pod {pod['metadata']['name']} printed no results line")
        results, artifacts = report.get("results"), report.get("artifacts")
        return (
            dict(results) if isinstance(results, dict) else {},
            list(artifacts) if isinstance(artifacts, list) else [],
            str(report.get("error") or ""),
        )

    def usage(self, uid: str) -> Usage | None:
        """The run's pod's usage as its node's kubelet reports it (:mod:`.kubelet_stats`);
        ``None`` where the node has no kubelet API the service may read through the API
        server (``get`` on ``nodes/proxy``)."""
        placed = self._placed.get(uid)
        if placed is None:
            return None
        pod, node = placed
        return self._stats.usage(node, self.namespace, pod)

    def usages(self, uids: Iterable[str]) -> dict[str, Usage]:
        if not self._spool.serves_any():  # no node's kubelet answers (kwok's): nothing to ask
            return {}
        placed = self._placed
        pods = ((uid, *where) for uid in uids if (where := placed.get(uid)) is not None)
        return self._stats.usages(self.namespace, pods)

    def _memory_now(self, node: str, pod: str) -> int | None:
        """The memory a pod holds now, as its kubelet said at most a second ago."""
        usage = self._stats.usage(node, self.namespace, pod, fresh=autoresize.FRESH)
        return None if usage is None else usage.memory_bytes

    def _node_summary(self, node: str) -> dict[str, Any]:
        return self._calls.json("GET", f"/api/v1/nodes/{node}/proxy/stats/summary")

    # -- resizing -------------------------------------------------------------------------

    def resize(
        self, uid: str, memory: int | None, cpu: int | None, by: str, why: str
    ) -> ResizeRecord:
        """Resize the run's pod in place through its ``resize`` subresource (:mod:`.resize`)."""
        return self._resizer.resize(uid, memory, cpu, by, why)

    # -- aborting -------------------------------------------------------------------------

    def abort(self, uid: str, reason: str, message: str) -> bool:
        """Delete the run's unfinished pods; ``False`` if it has none.

        The run is reported ``aborting`` now and ``aborted`` once its pod has stopped; a run
        held for room (:mod:`.gang`) has nothing on the cluster and is ``aborted`` at once.
        """
        if self._gang.drop(uid):
            self._tracker.deliver(
                f"held-{uid}", RunEvent(uid, RunState.ABORTED, reason=reason, message=message)
            )
            return True
        pods, workloads = self._to_abort(uid)
        live = [pod for pod in pods if not _finished(pod)]
        if not live and not workloads:
            return False
        self._announce(uid, reason, message, live)  # before the requests that carry it out
        notes = {names.ABORT_REASON: reason, names.ABORT_MESSAGE: message}
        for pod in live:
            meta = pod["metadata"]
            # The uid precondition: never touch a newer pod that took the same name.
            patch = {"metadata": {"uid": meta["uid"], "annotations": notes}}
            try:  # the reason, for whoever reads the pod; the delete is what aborts it
                self._on_pod("PATCH", meta["name"], patch, MERGE_PATCH)
            except (ClusterError, urllib3.exceptions.HTTPError, OSError) as error:
                log.warning("pod %s: the abort's reason was not written: %s", meta["name"], error)
        for pod in live:
            meta = pod["metadata"]
            options: dict[str, Any] = {"preconditions": {"uid": meta["uid"]}}
            if self._grace is not None:
                options["gracePeriodSeconds"] = self._grace
            self._on_pod("DELETE", meta["name"], options)
        for kind, workload in workloads:  # or its operator would make its pods again
            meta = workload["metadata"]
            path = object_path(workload["apiVersion"], kind, self.namespace, meta["name"])
            self._calls.change(f"deleting {kind} {meta['name']}", "DELETE", path, body=BACKGROUND)
        if not any(_main(pod) for pod in pods):
            # its operator had made no pod yet, or only helpers (an MPIJob's launcher waits for
            # its workers), whose ends say nothing of the run's: nothing else will say it ended
            self._tracker.deliver(
                f"workload-{uid}", RunEvent(uid, RunState.ABORTED, reason=reason, message=message)
            )
        return True

    def aborting(self, uid: str, reason: str, message: str) -> None:
        """Report the run ``aborting`` from its unfinished pods as the synced watch knows
        them, asking nothing: :meth:`abort`, which follows on an abort thread, reports the
        same (once) before its requests. A watch in trouble, or one that knows no unfinished
        pod of the run, leaves the report to :meth:`abort`, which lists what it must."""
        if self.watch.trouble() is not None:
            return
        live = [pod for pod in self.watch.known_by(uid) if not _finished(pod)]
        if live:
            self._announce(uid, reason, message, live)

    def _announce(self, uid: str, reason: str, message: str, live: list[dict[str, Any]]) -> None:
        """The run is aborting from now: its pods' later changes report the abort, and each
        of ``live`` is reported ``aborting`` with the abort's reason (the tracker publishes
        the same report of a pod once)."""
        self._tracker.abort(uid, reason, message)
        notes = {names.ABORT_REASON: reason, names.ABORT_MESSAGE: message}
        for pod in live:
            meta = pod["metadata"]
            annotated = {**meta, "annotations": {**(meta.get("annotations") or {}), **notes}}
            self._tracker.deliver(meta["uid"], pod_to_event({**pod, "metadata": annotated}))

    def _to_abort(self, uid: str) -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
        """The run's pods and operator workloads, to abort them: from the watch, with no
        request, when it knows them; else as the API has them now.

        A synced watch that is not failing knows every pod of the run it has been told of, so
        listing them again (the API server filters every pod of the namespace by label to
        answer: with 10,000 live runs, an abort's slowest step) adds nothing. It is asked only
        while it knows an unfinished pod of the run that no other object owns: a pod runplane
        created itself, so the run has no operator workload (an MPIJob, a SparkApplication)
        the watch cannot see. A run whose pod the watch has not yet reported (its create just
        answered), or whose pods an operator made, is listed as before.
        """
        if self.watch.trouble() is None:
            pods = self.watch.known_by(uid)
            if any(not _finished(pod) for pod in pods) and not any(
                pod["metadata"].get("ownerReferences") for pod in pods
            ):
                return pods, []
        return self._pods(uid), self._workloads(uid)

    def _on_pod(
        self, method: str, name: str, body: dict[str, Any], content_type: str = JSON
    ) -> bool:
        """Patch or delete one pod; False if it is already gone (or was replaced: 409 and 422
        say the uid precondition failed)."""
        path, gone = pods_path(self.namespace, name), (404, 409, 422)
        what = f"aborting pod {name}"
        return self._calls.change(what, method, path, gone, body=body, content_type=content_type)


def _run_uid(pod: Mapping[str, Any]) -> str:
    """The uid of the run a pod belongs to: the key the watch finds a run's pods by."""
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(names.RUN_UID) or "")


def _started(pod: Mapping[str, Any]) -> bool:
    """Whether the run's container has started, so that it has output to copy."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == main_container(pod):
            state = status.get("state") or {}
            return "running" in state or "terminated" in state
    return False


def _main(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is its run's main one (a job's pod, a launcher, a driver)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(names.ROLE) not in names.HELPER_ROLES


def _finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in cluster.FINISHED_PHASES

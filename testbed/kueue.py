"""Kueue (sigs.k8s.io/kueue), the queueing engine, run beside the testbed as a process.

It runs as the testbed's other controllers do: the binary built from its Go module by
``testbed/build.py``, outside the cluster with the admin kubeconfig. What an in-cluster install
gets from its Deployment, Service and cert-manager, it gets here from its configuration file:
no leader election, no internal certificate management, and a webhook server on 127.0.0.1 with
a serving certificate from the run's own CA (``testbed.pki``). The module's webhook manifests
are rewritten from ``service:`` to ``url: https://127.0.0.1:<port>/<path>`` with that CA as
``caBundle``. The visibility API (an aggregated API of its own) is left off with its feature
gate.

Two things it insists on that a testbed would rather not have: a metrics certificate at the
hard-coded ``/etc/kueue/metrics/certs`` (there is no flag or setting for that path; it is read
at start even with metrics off), made once per machine here if missing; and webhooks whose
``failurePolicy`` is ``Fail``. So that a stopped Kueue never blocks the testbed's other pods,
the webhooks for workloads (pods, Jobs, MPIJobs, ...) only see objects that carry the queue
label (an ``objectSelector``), which only what is meant for Kueue carries; ``stop`` removes the
webhooks and the CRDs (runplane's detection then finds no Kueue).

The default setup (``setup``) is runplane's own (:mod:`runplane.runtimes.kubernetes.kueue`):
two ResourceFlavors from the default spot preset's on-demand and spot labels and taints, the
workload priority classes, all in one cohort; each project's queues are made by the service on
its project's first run.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runplane.config import Settings
from runplane.runtimes.kubernetes import kueue as runplane_kueue
from runplane.runtimes.kubernetes.api.calls import Calls, ClusterError
from runplane.runtimes.kubernetes.api.rest import RestApi
from testbed import build, controllers, kube, pki, topology
from testbed.cluster import Cluster, Process, _http_ok, _spawn, _stop_group, _tail, _wait, free_port

NAME = "kueue"
#: Kueue's own namespace (its configuration's ``namespace``): events and nothing else here.
NAMESPACE = "kueue-system"
ADDRESS = "127.0.0.1"
#: Hard-coded in Kueue's main: read at start whenever internal cert management is off.
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
WEBHOOK_NAMES = ("mutating-webhook-configuration", "validating-webhook-configuration")
#: The job kinds Kueue manages here (its framework names), every kind runplane submits.
FRAMEWORKS = (
    "batch/job",
    "pod",
    "deployment",
    "statefulset",
    "kubeflow.org/mpijob",
    "sparkoperator.k8s.io/sparkapplication",
)
#: How long an admitted multi-pod workload may take to have all its pods ready before Kueue
#: evicts it and puts it back in the queue (all-or-nothing admission).
PODS_READY_TIMEOUT = "5m"


@dataclass
class Kueue:
    """The process and what registers it; ``stop`` undoes both."""

    cluster: Cluster
    process: Process
    port: int
    #: From the start of the process to its webhooks answering and its CRDs served.
    start_s: float = 0.0

    def check(self) -> None:
        """Fail at once, with the log's end, once the controller has exited."""
        if not self.process.alive():
            raise AssertionError(f"kueue exited:\n{_tail(self.process.log)}")

    def stop(self) -> None:
        try:
            uninstall(kube.api_client(self.cluster.kubeconfig, pool=2))
        finally:
            _stop_group(self.process)


def configuration(port: int, health_port: int, certs: Path) -> dict[str, Any]:
    """Kueue's configuration file for a process outside the cluster."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "internalCertManagement": {"enable": False},
        "leaderElection": {"leaderElect": False},
        # its default (20/s, bursts of 30) makes it the bottleneck of thousands of workloads:
        # Kueue sends about six requests per pod (its Workload, two status writes, the pod's
        # ungating, queue statuses, events); at 500/s the API server's CPU bounds admission
        "clientConnection": {"qps": 500, "burst": 1000},
        # one worker per kind by default: a pod's workload, made and admitted, waits its turn
        "controller": {
            "groupKindConcurrency": {"Pod": 5, "Workload.kueue.x-k8s.io": 5, "Job.batch": 5}
        },
        "webhook": {"host": ADDRESS, "port": port, "certDir": str(certs)},
        "health": {"healthProbeBindAddress": f"{ADDRESS}:{health_port}"},
        "metrics": {"bindAddress": "0"},
        # all-or-nothing: a workload whose pods are not all ready in time is evicted and
        # queued again; admissions are not serialised behind it (docs/decisions.md)
        "waitForPodsReady": {"timeout": PODS_READY_TIMEOUT, "blockAdmission": False},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        # what the queues do not count must not make a workload inadmissible
        "resources": {"excludeResourcePrefixes": ["ephemeral-storage", "hugepages-"]},
    }


def webhooks(source: str, port: int, ca: bytes) -> list[dict[str, Any]]:
    """The module's webhook configurations, pointed at ``https://127.0.0.1:<port>``; those for
    workloads see only objects that carry the queue label."""
    configurations = [doc for doc in yaml.safe_load_all(source) if doc]
    bundle = base64.b64encode(ca).decode()
    for configuration in configurations:
        for hook in configuration.get("webhooks") or []:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://{ADDRESS}:{port}{path}", "caBundle": bundle}
            groups = {group for rule in hook.get("rules") or [] for group in rule["apiGroups"]}
            if groups != {"kueue.x-k8s.io"}:
                hook["objectSelector"] = {
                    "matchExpressions": [{"key": runplane_kueue.QUEUE_LABEL, "operator": "Exists"}]
                }
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", NAMESPACE],
                        }
                    ]
                }
    return configurations


def _crds() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(build.kueue_crds().read_text()) if doc]


def install(api: client.ApiClient, port: int, ca: bytes, timeout: float = 90) -> None:
    """Kueue's CRDs (served before this returns) and its webhooks, created or replaced."""
    extensions = client.ApiextensionsV1Api(api)
    crds = _crds()
    for crd in crds:
        try:
            extensions.create_custom_resource_definition(cast(Any, crd))
        except ApiException as error:
            if error.status != 409:
                raise
            name = crd["metadata"]["name"]
            existing = extensions.read_custom_resource_definition(name).metadata
            crd["metadata"]["resourceVersion"] = existing.resource_version if existing else None
            extensions.replace_custom_resource_definition(name, cast(Any, crd))
    controllers.await_established(extensions, [c["metadata"]["name"] for c in crds], timeout)
    registration = client.AdmissionregistrationV1Api(api)
    for configuration in webhooks(build.kueue_webhooks().read_text(), port, ca):
        name = configuration["metadata"]["name"]
        mutating = configuration["kind"] == "MutatingWebhookConfiguration"
        delete = (
            registration.delete_mutating_webhook_configuration
            if mutating
            else registration.delete_validating_webhook_configuration
        )
        create = (
            registration.create_mutating_webhook_configuration
            if mutating
            else registration.create_validating_webhook_configuration
        )
        with contextlib.suppress(ApiException):
            delete(name)
        create(cast(Any, configuration))
    with contextlib.suppress(ApiException):
        client.CoreV1Api(api).create_namespace(cast(Any, {"metadata": {"name": NAMESPACE}}))


def uninstall(api: client.ApiClient, timeout: float = 60) -> None:
    """The webhooks first (a webhook nobody answers refuses what it sees), then the CRDs, gone
    before this returns: runplane looks for Kueue by its CRDs."""
    registration = client.AdmissionregistrationV1Api(api)
    for delete in (
        registration.delete_mutating_webhook_configuration,
        registration.delete_validating_webhook_configuration,
    ):
        for name in WEBHOOK_NAMES:
            _unless_absent(lambda delete=delete, name=name: delete(name))
    extensions = client.ApiextensionsV1Api(api)
    names = [crd["metadata"]["name"] for crd in _crds()]
    for name in names:
        _unless_absent(lambda name=name: extensions.delete_custom_resource_definition(name))
    deadline = time.monotonic() + timeout
    for name in names:
        while time.monotonic() < deadline:
            try:
                extensions.read_custom_resource_definition(name)
            except ApiException as error:
                if error.status == 404:
                    break
                raise
            time.sleep(0.2)


def _unless_absent(call: Any) -> None:
    try:
        call()
    except ApiException as error:
        if error.status != 404:
            raise


def metrics_certificate(directory: Path = METRICS_CERTS) -> None:
    """A self-signed pair where Kueue reads its metrics certificate, unless one is there. The
    metrics server is off (``bindAddress: "0"``), so nothing ever trusts it."""
    if (directory / "tls.crt").is_file() and (directory / "tls.key").is_file():
        return
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-metrics")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # written aside and renamed: a concurrent testbed never reads half a file
    for stem, data in (
        ("tls.key", pem),
        ("tls.crt", cert.public_bytes(serialization.Encoding.PEM)),
    ):
        partial = directory / f".{stem}.{time.monotonic_ns()}"
        partial.write_bytes(data)
        partial.chmod(0o600)
        partial.replace(directory / stem)


def setup(api: client.ApiClient, settings: Settings | None = None) -> None:
    """runplane's cluster-wide setup: the flavors from the spot preset, the priorities."""
    settings = settings or Settings()
    calls = Calls(RestApi(api), topology.RUNS_NAMESPACE, timeout=30, attempts=1)
    runplane_kueue.ensure_cluster_setup(calls, settings.spot, settings.priority_classes)


def start(
    cluster: Cluster,
    die_with_parent: bool = True,
    timeout: float = 120.0,
    default_setup: bool = True,
) -> Kueue:
    """Start Kueue for ``cluster``, install its CRDs and webhooks, and return once its webhook
    server answers (and, with ``default_setup``, runplane's flavors exist)."""
    # built if missing, or waited for while another process builds it (CI, beside the tests)
    binary = build.build_kueue()
    began = time.monotonic()
    metrics_certificate()
    directory = cluster.run_dir / "pki"
    certs = cluster.run_dir / "kueue-certs"
    certs.mkdir(exist_ok=True)
    serving = pki.issue_server(directory, "kueue-webhook", "kueue-webhook", (), (ADDRESS,))
    (certs / "tls.crt").write_bytes(serving.cert.read_bytes())
    (certs / "tls.key").write_bytes(serving.key.read_bytes())
    port, health = free_port(), free_port()
    config = cluster.run_dir / "kueue.yaml"
    config.write_text(yaml.safe_dump(configuration(port, health, certs), sort_keys=False))
    api = kube.api_client(cluster.kubeconfig, pool=4)
    install(api, port, (directory / "ca.crt").read_bytes())
    argv = [
        str(binary),
        f"--config={config}",
        "--feature-gates=VisibilityOnDemand=false,SparkApplicationIntegration=true",
        "--zap-log-level=info",
    ]
    env = {"KUBECONFIG": str(cluster.kubeconfig), "PATH": "/usr/bin:/bin"}
    process = _spawn(NAME, argv, cluster.run_dir, env, die_with_parent)
    running = Kueue(cluster, process, port)
    try:
        _wait(
            "kueue /readyz",
            lambda: _http_ok(f"http://{ADDRESS}:{health}/readyz"),
            [process],
            timeout,
        )
        if default_setup:
            deadline = time.monotonic() + timeout
            while True:  # the webhooks answer a moment after /readyz
                try:
                    setup(api)
                    break
                except ClusterError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
    except BaseException:
        running.stop()
        raise
    running.start_s = round(time.monotonic() - began, 1)
    return running


@contextlib.contextmanager
def running(cluster: Cluster) -> Iterator[Kueue]:
    """Kueue for the block; its webhooks and CRDs removed and the process stopped after it."""
    started = start(cluster)
    try:
        yield started
    finally:
        started.stop()


def flavor_of(workload: dict[str, Any]) -> dict[str, str]:
    """A workload's admitted flavor per resource, from its status (empty while not admitted)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    found: dict[str, str] = {}
    for pod_set in admission.get("podSetAssignments") or []:
        found.update(copy.deepcopy(pod_set.get("flavors") or {}))
    return found

"""The Kubeflow Spark Operator's controller, run as a process against the testbed.

The binary and its CRDs are ``testbed/spark_build.py``'s (built from the operator's Go module);
the controller watches only the tests' namespace, without its webhook (runplane's
SparkApplications carry every pod field in their pod templates, which spark-submit applies),
leader election, metrics or UI Services. It submits with ``spark-submit`` on this machine, from
the pyspark installed beside the tests (``SPARK_HOME``), with a kubeconfig whose client key is
in the traditional EC form: Spark's Kubernetes client (fabric8) cannot read the PKCS#8 key the
testbed writes. The driver's service account (the namespace's ``default``) is allowed what a
driver does: make and remove its executors' pods, its Service and ConfigMaps.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import build, controllers, kube, spark_build, spark_image
from testbed.cluster import Cluster, Process, _spawn

if TYPE_CHECKING:
    from testbed.pytest_plugin import TestbedCluster
    from testbed.realnode import RealNode

GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"
DRIVER_ROLE = "runplane-spark-driver"


@dataclass
class Operator(controllers.Controller):
    """The controller's process and the testbed it runs against."""

    tb: TestbedCluster


def install_crds(tb: TestbedCluster | client.ApiClient, timeout: float = 60) -> None:
    """The operator's own CRDs, replacing any older copy, each awaited until served. They come
    with the operator's build: callers build it first (``running``, ``start``, or a test's
    ``testbed_tool`` mark)."""
    api = tb if isinstance(tb, client.ApiClient) else tb.api
    extensions = client.ApiextensionsV1Api(api)
    names = []
    for file in spark_build.SPARK_CRDS:
        crd = yaml.safe_load((spark_build.crd_dir() / file).read_text())
        name = crd["metadata"]["name"]
        try:
            extensions.create_custom_resource_definition(crd)
        except ApiException as error:
            if error.status != 409:
                raise
            current = extensions.read_custom_resource_definition(name)
            crd["metadata"]["resourceVersion"] = kube.plain(api, current)["metadata"][
                "resourceVersion"
            ]
            extensions.replace_custom_resource_definition(name, crd)
        names.append(name)
    controllers.await_established(extensions, names, timeout)


def allow_drivers(api: client.ApiClient, namespace: str) -> None:
    """What a driver does with its namespace's default service account."""
    rbac = client.RbacAuthorizationV1Api(api)
    role: Any = {
        "metadata": {"name": DRIVER_ROLE},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["pods", "services", "configmaps", "persistentvolumeclaims"],
                "verbs": ["*"],
            }
        ],
    }
    binding: Any = {
        "metadata": {"name": DRIVER_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DRIVER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
    }
    for create in (
        lambda: rbac.create_namespaced_role(namespace, role),
        lambda: rbac.create_namespaced_role_binding(namespace, binding),
    ):
        try:
            create()
        except ApiException as error:
            if error.status != 409:
                raise


def traditional_kubeconfig(kubeconfig: Path, into: Path) -> Path:
    """A copy of ``kubeconfig`` whose client key is an ``EC PRIVATE KEY`` (openssl's ``ec``
    rewrites a PKCS#8 key in that form), for spark-submit's client."""
    into.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    for entry in config.get("users") or []:
        user = entry["user"]
        if "client-key" in user:
            key = into / f"{entry['name']}-ec.key"
            subprocess.run(
                ["openssl", "ec", "-in", user["client-key"], "-out", str(key)],
                check=True,
                capture_output=True,
            )
            key.chmod(0o600)
            user["client-key"] = str(key)
    out = into / "kubeconfig"
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    return out


def spark_home() -> str:
    """pyspark's folder beside the tests: ``bin/spark-submit`` and the jars are there."""
    import pyspark

    return str(Path(pyspark.__file__).parent)


@contextmanager
def running(tb: TestbedCluster, tag: str, namespace: str | None = None) -> Iterator[Operator]:
    """The CRDs installed and the controller running for the block, watching ``namespace``
    (the tests' by default); its log is ``<run dir>/logs/spark-operator-<tag>.log``."""
    namespace = namespace or tb.namespace
    # built if missing, or waited for while another process builds it (CI, beside the tests)
    binary = spark_build.build_operator()
    install_crds(tb)
    allow_drivers(tb.api, namespace)
    work = tb.run_dir / f"spark-operator-{tag}"
    kubeconfig = traditional_kubeconfig(tb.kubeconfig, work)
    log = tb.run_dir / "logs" / f"spark-operator-{tag}.log"
    command = argv(binary, kubeconfig, namespace)
    with controllers.process(command, log, env=environment(kubeconfig), cwd=work) as process:
        yield Operator("spark operator", process, log, tb)


def environment(kubeconfig: Path) -> dict[str, str]:
    """What spark-submit, run by the controller, needs: pyspark's folder and the API server."""
    server = urlsplit(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    return {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SPARK_HOME": spark_home(),
        # spark-submit's master URL is made from these (the in-cluster variables)
        "KUBERNETES_SERVICE_HOST": server.hostname or "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(server.port or 443),
    }


def argv(binary: Path, kubeconfig: Path, namespace: str) -> list[str]:
    """The controller's command line; an empty ``namespace`` watches every namespace."""
    return [
        str(binary),
        "controller",
        "start",
        f"--kubeconfig={kubeconfig}",
        *([f"--namespaces={namespace}"] if namespace else []),
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--enable-ui-service=false",
        "--leader-election=false",
        "--driver-pod-creation-grace-period=30s",
    ]


#: The namespace whose default service account ``up`` lets drivers use (``runplane serve``'s
#: default namespace); a run in another namespace needs ``allow_drivers`` there too.
DRIVER_NAMESPACE = "default"


def start(cluster: Cluster, node: RealNode, die_with_parent: bool = True) -> Process:
    """For ``python -m testbed up``: the Spark image on the real node, the CRDs, drivers
    allowed in :data:`DRIVER_NAMESPACE`, and the controller watching every namespace, as a
    process of the control plane's (``down`` stops it). Each is built first if the cache
    lacks it."""
    binary = build.build_spark_operator()
    node.import_archive(spark_image.build_image(), timeout=300)
    api = kube.api_client(cluster.kubeconfig, pool=2)
    install_crds(api)
    allow_drivers(api, DRIVER_NAMESPACE)
    kubeconfig = traditional_kubeconfig(cluster.kubeconfig, cluster.run_dir / "spark-operator")
    command = argv(binary, kubeconfig, "")
    env = environment(kubeconfig)
    return _spawn("spark-operator", command, cluster.run_dir, env, die_with_parent)

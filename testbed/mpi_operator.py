"""The Kubeflow MPI Operator's own controller (``mpi-operator``, built from its Go module by
``testbed/build.py``), run as a process against the testbed.

It runs outside the cluster with the admin kubeconfig, watching one namespace, with its leader
election lock there too (it always elects a leader; without ``--lock-namespace`` it wants a
namespace named ``mpi-operator``), and no metrics port. The hostfile names workers by their
full names in the job's headless Service (``--cluster-domain``), which the real node's DNS
(``testbed.podns``) answers. The CRD is the one of the operator's own module, installed (or
put in place of an older one) first. Tests use ``running()``; ``Operator.check`` fails at once,
with the controller's log, if the process died.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import build, controllers, kube, podns
from testbed.cluster import Cluster, Process, _spawn

if TYPE_CHECKING:
    from testbed.pytest_plugin import TestbedCluster
    from testbed.realnode import RealNode

GROUP, VERSION, PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
CRD_NAME = f"{PLURAL}.{GROUP}"


@dataclass
class Operator(controllers.Controller):
    """The controller's process, its log, and the namespace it watches."""

    namespace: str


def install_crd(api: client.ApiClient, timeout: float = 60) -> None:
    """The operator module's MPIJob CRD, created, or put in place of another version's; waits
    until it is served. The CRD comes with the operator's build: callers build it first
    (``running``, ``start``, or a test's ``testbed_tool`` mark)."""
    extensions = client.ApiextensionsV1Api(api)
    crd = yaml.safe_load(build.mpi_operator_crd().read_text())
    try:
        extensions.create_custom_resource_definition(crd)
    except ApiException as error:
        if error.status != 409:
            raise
        existing = extensions.read_custom_resource_definition(CRD_NAME).metadata
        crd["metadata"]["resourceVersion"] = existing.resource_version if existing else None
        extensions.replace_custom_resource_definition(CRD_NAME, crd)
    controllers.await_established(extensions, [CRD_NAME], timeout)


#: Where the operator started by ``up`` (watching every namespace) keeps its election lock.
LOCK_NAMESPACE = "kube-system"


def argv(binary: Path, kubeconfig: Path, namespace: str, lock_namespace: str) -> list[str]:
    """The controller's command line; an empty ``namespace`` watches every namespace."""
    return [
        str(binary),
        f"--kubeConfig={kubeconfig}",
        *([f"--namespace={namespace}"] if namespace else []),
        f"--lock-namespace={lock_namespace}",
        "--monitoring-port=0",
        f"--cluster-domain={podns.DOMAIN}",
    ]


@contextmanager
def running(tb: TestbedCluster, namespace: str, tag: str) -> Iterator[Operator]:
    """The CRD installed and the controller watching ``namespace`` for the block; its log is
    ``<run dir>/logs/mpi-operator-<tag>.log``. Built first if the cache lacks it."""
    binary = build.build_mpi_operator()
    install_crd(tb.api)
    log = tb.run_dir / "logs" / f"mpi-operator-{tag}.log"
    command = argv(binary, tb.kubeconfig, namespace, namespace)
    with controllers.process(command, log) as process:
        yield Operator("MPI operator", process, log, namespace)


def start(cluster: Cluster, node: RealNode, die_with_parent: bool = True) -> Process:
    """For ``python -m testbed up``: the MPI image on the real node, the CRD, and the
    controller watching every namespace, as a process of the control plane's (``down`` stops
    it). Each is built first if the cache lacks it."""
    binary = build.build_mpi_operator()
    node.import_archive(build.build_mpi_image())
    install_crd(kube.api_client(cluster.kubeconfig, pool=2))
    command = argv(binary, cluster.kubeconfig, "", LOCK_NAMESPACE)
    return _spawn("mpi-operator", command, cluster.run_dir, None, die_with_parent)

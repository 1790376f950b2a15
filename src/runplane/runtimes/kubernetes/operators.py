"""The operators a run's workload needs, and what a user is told when a cluster lacks one.

A SparkApplication or MPIJob is only a record until its operator acts on it: created on a
cluster that does not serve its kind, it is refused (404); created where the CRD exists but no
operator runs, it waits forever. The first is found before anything is submitted (API
discovery, :meth:`Submitter.check_served`), and the error names the operator, its CRD and how
to install it, so the run is refused at submission instead of being left pending.
"""

from __future__ import annotations

from dataclasses import dataclass

from runplane.errors import ConflictError


@dataclass(frozen=True)
class Requirement:
    """The operator that acts on a workload kind, the CRD that defines it, and its install."""

    operator: str
    crd: str
    install: str


#: (apiVersion, kind) -> what the cluster needs for it.
REQUIRED = {
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): Requirement(
        "the Kubeflow Spark Operator (v2)",
        "sparkapplications.sparkoperator.k8s.io",
        "helm repo add spark-operator https://kubeflow.github.io/spark-operator && "
        "helm install spark-operator spark-operator/spark-operator --namespace spark-operator "
        "--create-namespace --set 'spark.jobNamespaces={{NAMESPACE}}'",
    ),
    ("kubeflow.org/v2beta1", "MPIJob"): Requirement(
        "the Kubeflow MPI Operator (v0.8)",
        "mpijobs.kubeflow.org (version v2beta1)",
        "kubectl apply --server-side -f https://raw.githubusercontent.com/kubeflow/"
        "mpi-operator/v0.8.0/deploy/v2beta1/mpi-operator.yaml",
    ),
    ("kubeflow.org/v1", "MPIJob"): Requirement(
        "the Kubeflow Training Operator (v1)",
        "mpijobs.kubeflow.org (version v1)",
        "kubectl apply --server-side -k 'github.com/kubeflow/training-operator.git/"
        "manifests/overlays/standalone?ref=v1.8.1'",
    ),
}


def missing(api_version: str, kind: str, namespace: str) -> ConflictError:
    """The error for a cluster that does not serve ``kind`` in ``api_version``."""
    need = REQUIRED.get((api_version, kind))
    message = f"this cluster does not serve {kind} ({api_version})"
    if need is None:
        return ConflictError("kind", f"{message}; install the operator that defines it")
    message += (
        f", which runplane submits for this function: install {need.operator}, whose CRD "
        f"{need.crd} defines it, watching namespace {namespace!r}"
    )
    if kind == "MPIJob":
        message += ", or set mpijob_api_version to the MPIJob version the cluster serves"
    install = need.install.replace("{NAMESPACE}", namespace)
    return ConflictError("kind", f"{message}. To install it: {install}")

"""An mpijob as the MPI Operator's ``MPIJob``: one launcher that runs ``mpirun``, and workers.

Workers carry the function's resources (GPUs included), as MLRun renders them; the launcher
only starts the ranks, so it asks for nothing. Node selection, tolerations and affinity (the
preemption mode) and the priority class apply to both. The launcher's ``mpirun`` passes the
run's variables on to every rank (``-x``), so the ranks get the invocation however the
operator reaches the workers (SSH for ``v2beta1``, ``kubectl exec`` for ``v1``).

``kubeflow.org/v2beta1`` (the MPI Operator's current API) reaches workers over SSH: the
worker image needs ``sshd``, which the operator configures. ``kubeflow.org/v1`` (the Training
Operator's, what MLRun renders by default) execs into workers that only wait.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any

from runplane import bootstrap, names

#: What each version's workers run while the launcher drives them.
WORKER_COMMAND = {
    "kubeflow.org/v2beta1": ["/usr/sbin/sshd", "-De"],
    "kubeflow.org/v1": ["sleep", "infinity"],
}


def mpirun_command(worker: dict[str, Any], replicas: int) -> list[str]:
    """``mpirun`` starting one rank per worker, each running runplane's bootstrap."""
    container = worker["containers"][0]
    passed = dict.fromkeys([*bootstrap.INVOCATION_ENV, *(e["name"] for e in container["env"])])
    forwarded = [flag for name in passed for flag in ("-x", name)]
    return [
        "mpirun",
        "--allow-run-as-root",
        "-np",
        str(replicas),
        "-bind-to",
        "none",
        "-map-by",
        "slot",
        *forwarded,
        *container["command"],
    ]


def _with_role(pod_metadata: dict[str, Any], role: str) -> dict[str, Any]:
    metadata = copy.deepcopy(pod_metadata)
    metadata["labels"] = {**metadata.get("labels", {}), names.ROLE: role}
    return metadata


def launcher_command(mpirun: list[str]) -> list[str]:
    """``mpirun`` in a shell that then leaves the termination message saying the results are
    on the output's last line: rank 0 prints them there, and ``mpirun`` forwards its output."""
    quoted = " ".join(shlex.quote(part) for part in mpirun)
    note = shlex.quote('{"results_in_log": true}')
    return [
        "sh",
        "-c",
        f"{quoted}; code=$?; echo {note} > /dev/termination-log; exit $code",
    ]


def render_mpijob(
    api_version: str,
    metadata: dict[str, Any],
    pod_metadata: dict[str, Any],
    worker: dict[str, Any],
    launcher: dict[str, Any],
    replicas: int,
    retries: int,
) -> dict[str, Any]:
    """The MPIJob of ``replicas`` workers (pod spec ``worker``) and one launcher."""
    launcher = copy.deepcopy(launcher)
    worker = copy.deepcopy(worker)
    launcher["containers"][0]["command"] = launcher_command(mpirun_command(worker, replicas))
    launcher["containers"][0].pop("args", None)
    if worker["containers"][0]["command"] == list(names.BOOTSTRAP_COMMAND):
        worker["containers"][0]["command"] = list(WORKER_COMMAND[api_version])
    run_policy: dict[str, Any] = {
        "cleanPodPolicy": "Running",
        "backoffLimit": retries,
        "schedulingPolicy": {
            "minAvailable": replicas + 1,  # every pod or none: gang schedulers read this
            "priorityClass": worker["priorityClassName"],
        },
    }
    spec: dict[str, Any] = {
        "slotsPerWorker": 1,
        "runPolicy": run_policy,
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {"metadata": _with_role(pod_metadata, "launcher"), "spec": launcher},
            },
            "Worker": {
                "replicas": replicas,
                "restartPolicy": "Never",
                "template": {"metadata": _with_role(pod_metadata, "worker"), "spec": worker},
            },
        },
    }
    if api_version == "kubeflow.org/v2beta1":
        spec["mpiImplementation"] = "OpenMPI"
    return {"apiVersion": api_version, "kind": "MPIJob", "metadata": metadata, "spec": spec}

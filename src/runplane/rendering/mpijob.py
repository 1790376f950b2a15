"""An mpijob as the MPI Operator's ``MPIJob``: one launcher that runs ``mpirun``, and workers.

Workers carry the function's resources (GPUs included), as MLRun renders them; the launcher
only starts the ranks, so it asks for nothing. Node selection, tolerations and affinity (the
preemption mode) and the priority class apply to both. The launcher's ``mpirun`` passes the
run's variables on to every rank (``-x``), so the ranks get the invocation however the
operator reaches the workers (SSH for ``v2beta1``, ``kubectl exec`` for ``v1``).

``kubeflow.org/v2beta1`` (the MPI Operator's current API) reaches workers over SSH: the
image needs Open MPI, ``sshd`` (each worker runs it as root) and the ssh client, and the
operator mounts the keys of its Secret at ``sshAuthMountPath`` and writes the hostfile (one
slot per worker). The workers' readiness is sshd answering, and the operator creates the
launcher only once every worker is ready, so ``mpirun`` never dials a worker that is not
listening yet. With runplane's bootstrap the launcher runs ``mpirun`` through
:mod:`runplane.bootstrap.launcher`, which ends the output with the run's report: rank 0's
results, or the error of the rank that failed. ``kubeflow.org/v1`` (the Training Operator's,
what MLRun renders by default) execs into workers that only wait.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any

from runplane import bootstrap, names

#: What each version's workers run while the launcher drives them.
WORKER_COMMAND = {
    # sshd needs its privilege separation directory, which images that empty /run lack
    "kubeflow.org/v2beta1": ["sh", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -De"],
    "kubeflow.org/v1": ["sleep", "infinity"],
}
#: Where the operator mounts its Secret's ssh keys: root's, as the workers' sshd runs as root.
SSH_AUTH_MOUNT_PATH = "/root/.ssh"
SSH_PORT = 22
#: The launcher's program with runplane's bootstrap: the shipped package's launcher, run with
#: the image's own Python, ``mpirun`` and its arguments after it.
LAUNCHER_PROGRAM = (
    "import os, sys; "
    f"sys.path.insert(0, {names.BOOTSTRAP_DIR!r}); "
    f"from {bootstrap.SHIPPED_AS}.launcher import launch; "
    "sys.exit(launch(sys.argv[1:], os.environ))"
)


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


def launcher_command(mpirun: list[str], bootstrapped: bool = True) -> list[str]:
    """``mpirun`` through runplane's launcher (:data:`LAUNCHER_PROGRAM`), which ends the
    output with the run's report and says so in the termination message. A function that runs
    a script of its image has no bootstrap: its ``mpirun`` runs in a shell that leaves the same
    note (rank 0 of runplane's bootstrap prints the report last)."""
    if bootstrapped:
        return ["python3", "-c", LAUNCHER_PROGRAM, *mpirun]
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
    bootstrapped = worker["containers"][0]["command"] == list(names.BOOTSTRAP_COMMAND)
    launcher["containers"][0]["command"] = launcher_command(
        mpirun_command(worker, replicas), bootstrapped
    )
    launcher["containers"][0].pop("args", None)
    if bootstrapped:
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
        spec["sshAuthMountPath"] = SSH_AUTH_MOUNT_PATH
        spec["launcherCreationPolicy"] = "WaitForWorkersReady"
        if bootstrapped:  # runplane's sshd: ready once it answers
            worker["containers"][0]["readinessProbe"] = {
                "tcpSocket": {"port": SSH_PORT},
                "periodSeconds": 1,
            }
    return {"apiVersion": api_version, "kind": "MPIJob", "metadata": metadata, "spec": spec}

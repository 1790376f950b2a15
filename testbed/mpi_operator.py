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

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import build, podns
from testbed.pytest_plugin import TestbedCluster

GROUP, VERSION, PLURAL = "kubeflow.org", "v2beta1", "mpijobs"
CRD_NAME = f"{PLURAL}.{GROUP}"


@dataclass
class Operator:
    """The controller's process, its log, and the namespace it watches."""

    process: subprocess.Popen[bytes]
    log: Path
    namespace: str

    def check(self) -> None:
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-4000:]
            raise AssertionError(f"the MPI operator exited {self.process.returncode}:\n{tail}")

    def tail(self, size: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-size:]


def install_crd(api: client.ApiClient, timeout: float = 60) -> None:
    """The operator module's MPIJob CRD, created, or put in place of another version's; waits
    until it is served."""
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
    deadline = time.monotonic() + timeout
    while True:
        status = extensions.read_custom_resource_definition(CRD_NAME).status
        conditions = {c.type: c.status for c in (status.conditions or [])} if status else {}
        if conditions.get("Established") == "True":
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"CRD {CRD_NAME} not established after {timeout:.0f}s")
        time.sleep(0.2)


@contextmanager
def running(tb: TestbedCluster, namespace: str, tag: str) -> Iterator[Operator]:
    """The CRD installed and the controller watching ``namespace`` for the block; its log is
    ``<run dir>/logs/mpi-operator-<tag>.log``. Built first if the cache lacks it."""
    binary = build.build_mpi_operator()
    install_crd(tb.api)
    log = tb.run_dir / "logs" / f"mpi-operator-{tag}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(binary),
                f"--kubeConfig={tb.kubeconfig}",
                f"--namespace={namespace}",
                f"--lock-namespace={namespace}",
                "--monitoring-port=0",
                f"--cluster-domain={podns.DOMAIN}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield Operator(process, log, namespace)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

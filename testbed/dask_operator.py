"""The dask-kubernetes operator's own controller, run as a process against the testbed.

The controller is the one the ``dask-kubernetes`` package ships (``dask_kubernetes.operator.
controller``, kopf-based), watching only the tests' namespace, with the package's CRDs (kept in
``testbed/crds``) installed first. Tests use ``running()`` and await pods with ``Operator.pods``;
a wait fails at once, with the controller's log, if the process died.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from testbed import controllers, kube
from testbed.pytest_plugin import TestbedCluster

CRDS = Path(__file__).parent / "crds"
INSTALLED = (
    "kubernetes.dask.org_daskclusters.yaml",
    "kubernetes.dask.org_daskworkergroups.yaml",
    "kubernetes.dask.org_daskautoscalers.yaml",
)
GROUP, VERSION = "kubernetes.dask.org", "v1"


@dataclass
class Operator(controllers.Controller):
    """The controller's process and the testbed it runs against."""

    tb: TestbedCluster

    def pods(
        self, selector: str, test: Callable[[list[client.V1Pod]], bool], timeout: float = 60
    ) -> list[client.V1Pod]:
        """The pods matching ``selector`` once ``test`` holds for them, awaited on a watch."""
        core = self.tb.core
        ns = self.tb.namespace
        deadline = time.monotonic() + timeout
        while True:
            self.check()
            listed = core.list_namespaced_pod(ns, label_selector=selector)
            pods = {p.metadata.name: p for p in listed.items if p.metadata}
            if test(list(pods.values())):
                return list(pods.values())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                shown = yaml.safe_dump(kube.plain(self.tb.api, list(pods.values())))
                tail = self.log.read_text(errors="replace")[-3000:]
                raise AssertionError(f"pods {selector}:\n{shown}\noperator log:\n{tail}")
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                core.list_namespaced_pod,
                ns,
                label_selector=selector,
                resource_version=listed.metadata.resource_version if listed.metadata else None,
                timeout_seconds=max(1, min(5, int(remaining))),
            )
            for event in stream:
                pod = event["object"]
                if event["type"] == "DELETED":
                    pods.pop(pod.metadata.name, None)
                else:
                    pods[pod.metadata.name] = pod
                if test(list(pods.values())):
                    return list(pods.values())


def install_crds(
    tb: TestbedCluster, files: tuple[str, ...] = INSTALLED, timeout: float = 60
) -> None:
    """Create operators' CRDs from ``testbed/crds`` (an existing one is kept) and wait until
    each is served."""
    extensions = client.ApiextensionsV1Api(tb.api)
    installed = []
    for file in files:
        crd = yaml.safe_load((CRDS / file).read_text())
        try:
            extensions.create_custom_resource_definition(crd)
        except ApiException as error:
            if error.status != 409:
                raise
        installed.append(crd["metadata"]["name"])
    controllers.await_established(extensions, installed, timeout)


@contextmanager
def running(tb: TestbedCluster, tag: str) -> Iterator[Operator]:
    """The CRDs installed and the controller running for the block; its log is
    ``<run dir>/logs/dask-operator-<tag>.log``."""
    install_crds(tb)
    log = tb.run_dir / "logs" / f"dask-operator-{tag}.log"
    command = [
        sys.executable,
        "-m",
        "kopf",
        "run",
        "--standalone",
        "--namespace",
        tb.namespace,
        "-m",
        "dask_kubernetes.operator.controller",
    ]
    env = {**os.environ, "KUBECONFIG": str(tb.kubeconfig)}
    with controllers.process(command, log, env=env) as process:
        yield Operator("dask operator", process, log, tb)

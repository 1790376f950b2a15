"""An operator's controller run as a process beside the testbed, and its CRDs awaited.

The Spark, MPI and Dask operators all run the same way in tests: the CRDs served first, then
the controller in a session of its own writing to ``<run dir>/logs``, stopped when the block
ends (terminated, killed if it lingers) so that no test leaves one behind.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client

from runplane.runtimes.kubernetes.api.calls import Calls
from runplane.runtimes.kubernetes.api.rest import RestApi


@dataclass
class Controller:
    """A running controller: what it is called in errors, its process and its log."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def check(self) -> None:
        """Fail at once, with the log's end, once the controller has exited: a wait on it
        would otherwise run to its timeout."""
        if self.process.poll() is not None:
            raise AssertionError(
                f"the {self.name} exited {self.process.returncode}:\n{self.tail()}"
            )

    def tail(self, size: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-size:]


def await_established(
    extensions: client.ApiextensionsV1Api, names: Iterable[str], timeout: float
) -> None:
    """Wait until every named CRD is served: a custom resource made before that is refused.

    Served means established and in API discovery too: the API server lists a new resource in
    its group's discovery a moment after the CRD is established, and the service asks discovery
    whether an operator's kind exists (on a busy machine that moment was long enough for a
    submission to be refused as if no operator were installed)."""
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = extensions.read_custom_resource_definition(name)
            status = crd.status
            conditions = {c.type: c.status for c in (status.conditions or [])} if status else {}
            if conditions.get("Established") == "True" and _discovered(extensions, crd):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"CRD {name} not served after {timeout:.0f}s")
            time.sleep(0.2)


def _discovered(
    extensions: client.ApiextensionsV1Api, crd: client.V1CustomResourceDefinition
) -> bool:
    """Whether API discovery lists ``crd``'s resource in every version it serves, asked as the
    service asks it before it takes a run of an operator's kind (``Calls.serves``)."""
    calls = Calls(RestApi(extensions.api_client), "default", timeout=30, attempts=1)
    return all(
        calls.serves(f"{crd.spec.group}/{version.name}", crd.spec.names.plural, fresh=True)
        for version in crd.spec.versions
        if version.served
    )


@contextmanager
def process(
    command: list[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` running for the block, its output in ``log``; stopped however the block ends."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        started = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield started
    finally:
        started.terminate()
        try:
            started.wait(30)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait(10)

"""What every runtime is given and what it must do: one interface for here and for clusters.

The service calls runtimes only through :class:`Runtime`. What differs between backends is
declared in :class:`Capabilities`, so callers ask what a runtime can do instead of checking
which one it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runplane.bootstrap import Invocation
from runplane.placement import NodeSummary
from runplane.placement.quotas import QuotaTable
from runplane.rendering.resources import EffectiveResources
from runplane.rendering.workloads import main_pod_spec
from runplane.runs import ResizeRecord, Usage
from runplane.runtimes.events import EventChannel, RunEvent

#: The most output one ``Runtime.logs`` call returns, so a long log streams in pieces.
LOG_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One attempt of a run, rendered and checked, ready for any runtime.

    Built once, by :func:`runplane.runtimes.request.build_request`, whichever runtime runs it.
    ``manifests`` are the rendered objects (the Pod first, carrying the invocation in its
    environment, then any Secret it needs); runtimes that start processes themselves read the
    Pod's spec and the invocation instead.
    """

    invocation: Invocation
    manifests: list[dict[str, Any]]
    #: The effective requests, limits, preemption mode and priority, as rendering decided.
    resources: EffectiveResources
    submitted: float
    #: The caller's directory, importable by the handler when it runs on the caller's machine.
    source_dir: str = ""
    #: For a workload of several pods, the pod spec one process tree of it gets on a machine
    #: (an mpijob's worker, a spark application's driver with its executors' resources), what
    #: that process tree is given, and how many such processes start together (an mpijob's
    #: ranks).
    local_pod: dict[str, Any] | None = None
    local_resources: EffectiveResources | None = None
    replicas: int = 1

    @property
    def uid(self) -> str:
        return self.invocation.uid

    @property
    def attempt(self) -> int:
        return self.invocation.attempt

    @property
    def priority(self) -> int:
        return self.resources.priority

    @property
    def process_resources(self) -> EffectiveResources:
        """What the run's process tree on one machine is given (see ``local_pod``)."""
        return self.local_resources or self.resources

    @property
    def pod(self) -> dict[str, Any]:
        return self.manifests[0]

    @property
    def pod_spec(self) -> dict[str, Any]:
        """The spec of the run's main pod (see ``local_pod``)."""
        spec = self.local_pod or main_pod_spec(self.pod)
        assert spec is not None, "a workload without pods carries a local pod"
        return spec


@dataclass(frozen=True, slots=True)
class Call:
    """An HTTP request to a serving deployment, as its handler's ``event`` will see it."""

    method: str
    path: str
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class Answer:
    """A serving deployment's answer: its status, content type and body."""

    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a runtime can do, for callers that must not branch on its name."""

    #: Runs can be granted GPUs.
    gpus: bool
    #: Spot and on-demand capacity exist side by side, so a run can be preempted and the
    #: preemption mode chooses between them.
    preemption: bool
    #: Node labels can be changed while the runtime runs (not only by configuration), with
    #: :meth:`Runtime.label_node`.
    node_labels: bool
    #: Serving functions can be deployed.
    deploy: bool
    #: Runs outlive the runtime's process: after a restart they are watched again, not lost.
    durable: bool


class Runtime(Protocol):
    """A backend that executes runs and reports what happens to them as events."""

    #: The name runs record and configuration uses (``service.runtime``).
    name: str
    capabilities: Capabilities
    #: How runs are held and kept apart (limits, processes, users), in a sentence for
    #: ``runplane serve`` to say at start.
    isolation: str

    def check(self, request: RunRequest) -> None:
        """Raise the user errors this runtime can find before anything is recorded (a volume
        with no local directory, a missing secret); start nothing."""

    def launch(self, request: RunRequest) -> None:
        """Start the run, or queue it until it fits; what follows arrives as events."""

    def abort(self, uid: str, reason: str, message: str) -> bool:
        """Stop a run; ``False`` if this runtime has nothing of it left to stop."""

    def aborting(self, uid: str, reason: str, message: str) -> None:
        """Report the run ``aborting`` now, from what the runtime knows of it without asking
        anyone, when :meth:`abort` follows on another thread: the service's monitor calls it
        as it decides to abort (a threshold breached), so that a burst of aborts, each waiting
        on requests to a cluster, reports each run when it was decided, not as its turn to be
        carried out comes. A runtime whose abort reports at once does nothing here."""

    def resize(
        self, uid: str, memory: int | None, cpu: int | None, by: str, why: str
    ) -> ResizeRecord:
        """Change a running run's memory limit (bytes) and CPU limit (millicores) in place,
        never restarting it (``None``: as it is); the change is also told as a ``Resized``
        event. Raises :class:`~runplane.errors.ResizeRefusedError` with the reason where the
        run, its kind or its node cannot."""

    def events(self) -> EventChannel:
        """Every state change of every run this runtime launched or finds, in order, until
        :meth:`close`; one reader."""

    def logs(self, uid: str, offset: int = 0) -> tuple[bytes, int]:
        """The run's output from byte ``offset`` on (at most :data:`LOG_CHUNK` bytes), and the
        offset to ask for next."""

    def usage(self, uid: str) -> Usage | None:
        """What the running run has used so far; ``None`` when the runtime cannot tell."""

    def usages(self, uids: Iterable[str]) -> dict[str, Usage]:
        """:meth:`usage` of each of these runs that the runtime can tell about, in one call:
        the service samples every live run twice a second, and thousands of calls of their
        own would cost it that often even where no run can be measured."""

    def nodes(self) -> list[NodeSummary]:
        """The nodes runs can land on, with what is free on each now."""

    def label_node(self, name: str, labels: Mapping[str, str | None]) -> dict[str, str]:
        """Set the node's labels in ``labels`` and remove those given ``None`` (checked with
        :func:`runplane.runtimes.labelling.check_label_change`), where they last: the Node
        object of a cluster, this machine's stored labels here; the node's labels after.
        Placement decided from now on sees them. Raise ``NotFoundError`` for a node this
        runtime does not have (when ``capabilities.node_labels``)."""

    def apply_quotas(self, quotas: QuotaTable) -> None:
        """Hold runs to these project quotas from now on (every project's, ``{}``: none):
        called at the service's start and after every change an admin makes. A run its
        project's quota cannot hold now waits with :data:`~runplane.runs.Reason`
        ``WAITING_FOR_QUOTA`` and :func:`~runplane.placement.quotas.waiting_text`'s words."""

    def deploy(self, manifests: Sequence[Mapping[str, Any]]) -> list[str]:
        """Create or update a serving function's objects (when ``capabilities.deploy``)."""

    def deployments(self) -> list[dict[str, Any]]:
        """The serving deployments this runtime runs, each with ``project``, ``name``,
        ``owner`` (who deployed it through the service, else ``""``), ``state`` (a
        :class:`~runplane.runtimes.deployments.DeploymentState`), ``desired``, ``ready`` and
        ``url``."""

    def delete_deployment(self, project: str, name: str) -> str:
        """Stop and remove a serving deployment; returns ``project/name``."""

    def invoke(self, project: str, name: str, call: Call) -> Answer:
        """Send ``call`` to a serving deployment; its answer, whatever its status."""

    def watching(self) -> str | None:
        """What keeps this runtime from seeing its runs change now, in words (a watch that
        has not listed yet, or keeps failing); ``None`` while it sees them. A service that
        cannot see its runs' ends must not take traffic (``GET /api/v1/ready``)."""

    def existing(self) -> dict[str, list[str]]:
        """What exists of each run (pods, processes) by run uid, as the backend has it now."""

    def end_left(self, uid: str, attempt: int) -> RunEvent | None:
        """How attempt ``attempt`` of run ``uid`` ended, as what it left behind tells, for a
        run whose executor died before its end was recorded; ``None`` when nothing says it
        ended (it died with its executor). Asked at a start, before a run is declared lost."""

    def close(self, grace: float = 0.0) -> None:
        """Start nothing more and stop reporting. Runs that die with this process get
        ``grace`` seconds to finish and are then aborted (reported); queued runs are let go
        unreported, for the caller to settle. A durable runtime's runs keep running."""

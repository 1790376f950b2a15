"""What a serving deployment reports, in the same words on every runtime, so the CLI, the SDK
and the UI read one vocabulary whether replicas run here or as a Kubernetes Deployment."""

from __future__ import annotations

from enum import StrEnum


def deployment_state(desired: int, ready: int) -> DeploymentState:
    """The state of a deployment that wants ``desired`` replicas of which ``ready`` answer."""
    if desired and ready >= desired:
        return DeploymentState.READY
    return DeploymentState.DEGRADED if ready else DeploymentState.PENDING


class DeploymentState(StrEnum):
    """A serving deployment's state, as ``runplane get deployments`` shows it: ``pending``
    while no replica answers, ``degraded`` while some do but fewer than wanted (one restarting,
    a rollout under way), ``ready`` when every wanted replica answers, and ``stopped`` when
    nothing keeps it running any more (its supervisor on this machine is gone)."""

    PENDING = "pending"
    DEGRADED = "degraded"
    READY = "ready"
    STOPPED = "stopped"

"""The runtimes runplane has, by the name configuration gives them (``service.runtime``).

The one place a runtime is chosen by name; everything else asks a runtime what it can do
(:class:`~runplane.runtimes.contract.Capabilities`).
"""

from __future__ import annotations

from collections.abc import Callable

from runplane.config import Settings
from runplane.runtimes.contract import Runtime


def _local(settings: Settings, serving: bool) -> Runtime:
    from runplane.runtimes.local.runtime import LocalRuntime

    return LocalRuntime(settings, serving=serving)


def _kubernetes(settings: Settings, serving: bool) -> Runtime:
    from runplane.runtimes.kubernetes.runtime import KubernetesRuntime

    service = settings.service
    return KubernetesRuntime(
        settings,
        kubeconfig=service.kubeconfig,
        context=service.kube_context,
        instance=service.instance,
        # A replica among several watches only once it leads (its service reads the events).
        observe=not service.leader_election.enabled,
    )


RUNTIMES: dict[str, Callable[[Settings, bool], Runtime]] = {
    "local": _local,
    "kubernetes": _kubernetes,
}


def create_runtime(settings: Settings, serving: bool = False) -> Runtime:
    """The runtime ``settings.service.runtime`` names; ``serving`` when ``runplane serve``
    runs it, for its users' runs rather than its own user's."""
    return RUNTIMES[settings.service.runtime](settings, serving)

"""Backends that execute rendered work: ``local`` (processes here) and ``kubernetes`` (pods).

Every runtime implements one contract (:mod:`runplane.runtimes.contract`): launch a
:class:`RunRequest` built by :func:`runplane.runtimes.request.build_request`, report what happens
as :class:`~runplane.runtimes.events.RunEvent` values, abort, serve logs and usage. Kept free of
imports: a run's own process starts from modules in this package.
"""

from __future__ import annotations

# MLRun's runtime class names (``mlrun.runtimes.KubejobRuntime``...) resolve, on first use, to
# runplane's function kinds (see runplane.runtimes.kinds); the backends above load nothing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: MLRun's runtime class names; :mod:`runplane.runtimes.kinds` defines each (its ``__all__``).
KIND_NAMES = frozenset(
    {
        "BaseRuntime",
        "DaskCluster",
        "HandlerRuntime",
        "KubeResource",
        "KubejobRuntime",
        "LocalRuntime",
        "MpiRuntimeV1",
        "MpiRuntimeV1Alpha1",
        "RemoteRuntime",
        "RemoteSparkRuntime",
        "RuntimeKinds",
        "ServingRuntime",
        "Spark3Runtime",
    }
)


def __getattr__(name: str) -> Any:
    if name not in KIND_NAMES:
        raise AttributeError(f"module 'runplane.runtimes' has no attribute {name!r}")
    from runplane.runtimes import kinds

    return getattr(kinds, name)

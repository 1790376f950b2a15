"""MLRun's runtime classes, as names for runplane's function kinds.

MLRun has a class per kind of function (``KubejobRuntime`` for ``job``, ``RemoteRuntime`` and
``ServingRuntime`` for real-time functions, ``DaskCluster``, ``MpiRuntimeV1``,
``Spark3Runtime``); runplane has one :class:`~runplane.spec.Function` whose ``kind`` says which.
Each name here answers ``isinstance(fn, KubejobRuntime)`` by the function's kind, and calling
it makes a function of that kind, so code that checks or builds functions by class keeps
working. A kind runplane does not run is refused by name when a function of it is made.
"""

from __future__ import annotations

from typing import Any

from runplane.runtimes import KIND_NAMES
from runplane.spec.function import Function
from runplane.spec.loaders import new_function

#: The names :mod:`runplane.runtimes` answers with a class from here.
__all__ = sorted(KIND_NAMES)


class _KindName(type):
    """A class that is a function kind's name: instances are functions of those kinds."""

    kinds: tuple[str, ...]

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, Function) and (
            not cls.kinds or instance.kind.value in cls.kinds
        )

    def __call__(cls, metadata: Any = None, spec: Any = None, **options: Any) -> Function:
        name = metadata.get("name", "") if isinstance(metadata, dict) else ""
        return new_function(name=name, kind=cls.kinds[0] if cls.kinds else "job", **options)


class BaseRuntime(metaclass=_KindName):
    """Any function."""

    kinds: tuple[str, ...] = ()


class KubeResource(BaseRuntime):
    kinds = ("job", "serving")


class KubejobRuntime(BaseRuntime):
    """A ``job``: runs to completion."""

    kinds = ("job",)


class LocalRuntime(KubejobRuntime):
    """MLRun's in-process job: runplane runs it as a ``job`` on this machine."""


class HandlerRuntime(KubejobRuntime):
    pass


class RemoteRuntime(BaseRuntime):
    """A real-time function (MLRun's ``nuclio`` kind): runplane's ``serving``."""

    kinds = ("serving",)


class ServingRuntime(RemoteRuntime):
    pass


class DaskCluster(BaseRuntime):
    kinds = ("dask",)


class MpiRuntimeV1(BaseRuntime):
    kinds = ("mpijob",)


class MpiRuntimeV1Alpha1(MpiRuntimeV1):
    pass


class Spark3Runtime(BaseRuntime):
    kinds = ("spark",)


class RemoteSparkRuntime(Spark3Runtime):
    pass


class RuntimeKinds:
    """MLRun's kind names (``RuntimeKinds.job``...), as runplane reads them."""

    job = "job"
    local = "local"
    handler = "handler"
    serving = "serving"
    nuclio = "nuclio"
    remote = "remote"
    dask = "dask"
    mpijob = "mpijob"
    spark = "spark"
    remotespark = "remote-spark"

    @staticmethod
    def all() -> list[str]:
        return ["job", "local", "handler", "serving", "nuclio", "remote", "dask", "mpijob", "spark"]

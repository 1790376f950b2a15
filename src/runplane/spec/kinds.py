"""The kinds of function, their other names, and the settings each kind allows."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from runplane.errors import ConflictError, InvalidValueError
from runplane.spec.roles import check_roles

if TYPE_CHECKING:
    from runplane.spec.function import Function
    from runplane.spec.function_spec import FunctionSpec


class FunctionKind(StrEnum):
    """``job`` runs to completion; ``serving`` is a long-running HTTP service; ``mpijob``,
    ``dask`` and ``spark`` spread one computation over several processes or pods (see
    docs/runtimes.md)."""

    JOB = "job"
    SERVING = "serving"
    MPIJOB = "mpijob"
    DASK = "dask"
    SPARK = "spark"


#: Other names of a kind: ``local`` (MLRun's in-process job, and what functions exported by
#: earlier runplane versions may say) and ``handler`` run as a job, here or through the
#: service; ``nuclio`` and ``remote`` (MLRun's names of a real-time function) are ``serving``.
KIND_ALIASES = {
    "local": FunctionKind.JOB,
    "handler": FunctionKind.JOB,
    "nuclio": FunctionKind.SERVING,
    "remote": FunctionKind.SERVING,
}


def check_kind(kind: object) -> FunctionKind:
    try:
        if not isinstance(kind, str):
            raise ValueError(kind)
        return KIND_ALIASES.get(kind) or FunctionKind(kind or FunctionKind.JOB)
    except ValueError:
        raise InvalidValueError(
            "kind",
            kind,
            "allowed kinds are " + ", ".join(k.value for k in FunctionKind),
            "kind='job'",
        ) from None


def check_servable(fn: Function) -> None:
    """A serving function's replicas call its handler from its embedded code: without either,
    every replica would fail as it starts, so the deploy is refused before any starts."""
    if not fn.spec.build.source or not fn.spec.handler:
        raise InvalidValueError(
            "spec.handler" if fn.spec.build.source else "spec.build.source",
            fn.spec.handler if fn.spec.build.source else "",
            "a serving function needs its code embedded and the handler to call",
            "code_to_function('serve', filename='serve.py', kind='serving', handler='handler')",
        )


def require_kind(fn: Function, kind: FunctionKind, why: str, example: str) -> None:
    """Refuse an operation that belongs to functions of ``kind`` alone (deploy and invoke to
    serving ones, a cluster client to dask ones); ``why`` and ``example`` say so."""
    if fn.kind is not kind:
        raise InvalidValueError("kind", fn.kind.value, why, example)


def check_kind_rules(kind: FunctionKind, spec: FunctionSpec) -> None:
    """Settings that only make sense for some kinds of function."""
    if kind in (FunctionKind.SERVING, FunctionKind.DASK) and spec.state_thresholds:
        watched = "their own health checks" if kind is FunctionKind.SERVING else "their client"
        raise ConflictError(
            "spec.state_thresholds",
            f"state thresholds do not apply to {kind.value} functions, which are watched by "
            f"{watched}; remove them or use kind='job'",
        )
    if kind is not FunctionKind.SERVING and spec.http is not None:
        raise ConflictError(
            "spec.http", f"with_http applies to serving functions, not kind={kind.value!r}"
        )
    if kind is not FunctionKind.DASK and spec.nthreads is not None:
        raise ConflictError(
            "spec.nthreads", f"nthreads applies to dask functions, not kind={kind.value!r}"
        )
    if kind is not FunctionKind.JOB and spec.autoresize is not None:
        raise ConflictError(
            "spec.autoresize",
            f"live right-sizing applies to job functions (one process or pod), not "
            f"kind={kind.value!r}; remove with_autoresize or use kind='job'",
        )
    check_roles(kind.value, spec)

"""The calls that set requests and limits: the function's own (``with_requests``,
``with_limits``) and, for the kinds whose pods do different work, each role's: a dask
cluster's workers and scheduler, a spark application's driver and executors.

A role's calls take the same arguments, follow the same ``patch`` rule and make the same checks
as the function's own, and write ``spec.<role>_resources``. A role's unset keys come from the
function's own ``spec.resources`` at render time, then from the service defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runplane import names
from runplane.errors import ConflictError
from runplane.spec.quantity import parse_quantity
from runplane.spec.resources import COMPUTE, check_gpu_count, check_gpu_type

if TYPE_CHECKING:
    from runplane.spec.function import Function
    from runplane.spec.function_spec import FunctionSpec
    from runplane.spec.kinds import FunctionKind

#: The roles each kind has, and the kind each role belongs to.
ROLES = {"worker": "dask", "scheduler": "dask", "driver": "spark", "executor": "spark"}


def check_roles(kind: str, spec: FunctionSpec) -> None:
    """Role resources set on a kind without that role are refused, naming the right kind."""
    for role, owner in ROLES.items():
        resources = getattr(spec, f"{role}_resources")
        if (resources.requests or resources.limits) and kind != owner:
            raise ConflictError(
                f"spec.{role}_resources",
                f"{role} resources apply to {owner} functions, not kind={kind!r}; use "
                f"with_requests/with_limits (example: new_function('x', kind={owner!r}))",
            )


class ResourceCalls:
    """The resource modifiers of :class:`~runplane.spec.function.Function`."""

    if TYPE_CHECKING:
        kind: FunctionKind
        spec: FunctionSpec

        def _replace(self, part: str, **changes: Any) -> Function: ...

    def with_requests(self, mem: Any = None, cpu: Any = None, patch: bool = False) -> Function:
        """Set what the function needs to start (the scheduler reserves it).

        Without ``patch`` the requests are replaced by exactly the keys given.
        """
        return self._requests("resources", "with_requests", mem, cpu, patch)

    def with_limits(
        self,
        mem: Any = None,
        cpu: Any = None,
        gpus: Any = None,
        gpu_type: str = names.GPU,
        patch: bool = False,
    ) -> Function:
        """Set the most the function may use; GPUs are requested equal to their limit."""
        return self._limits("resources", "with_limits", mem, cpu, gpus, gpu_type, patch)

    def with_autoresize(
        self,
        max_mem: Any,
        max_cpu: Any = None,
        step: float = 1.5,
        threshold: float = 0.9,
        window: str | float = "2s",
    ) -> Function:
        """Raise a running job's limits in place instead of letting it be OOM-killed: when
        its memory stays above ``threshold`` of its limit for ``window``, the limit (and
        request) grows ``step`` times, never above ``max_mem``; its CPU limit likewise while
        it is throttled, up to ``max_cpu`` (``None``: CPU is never changed). The job needs a
        memory limit (``with_limits(mem=...)``); ``max_mem=None`` turns right-sizing off.
        """
        if max_mem is None:
            return self._replace("spec", autoresize=None)
        setting = {
            "max_mem": max_mem,
            "max_cpu": max_cpu,
            "step": step,
            "threshold": threshold,
            "window": window,
        }
        return self._replace("spec", autoresize=setting)

    def _requests(self, part: str, call: str, mem: Any, cpu: Any, patch: bool) -> Function:
        given = compute_quantities(mem, cpu, call)
        current = getattr(self.spec, part)
        requests = {**current.requests, **given} if patch else given
        return self._replace(part, requests=requests)  # Resources checks request <= limit

    def _limits(
        self, part: str, call: str, mem: Any, cpu: Any, gpus: Any, gpu_type: str, patch: bool
    ) -> Function:
        given: dict[str, Any] = compute_quantities(mem, cpu, call)
        if gpus is not None:
            given[check_gpu_type(f"{call}(gpu_type=...)", gpu_type)] = check_gpu_count(
                f"{call}(gpus=...)", gpus
            )
        current = getattr(self.spec, part)
        limits = {**current.limits, **given} if patch else given
        if gpus is not None:
            limits = {k: v for k, v in limits.items() if k in COMPUTE or k == gpu_type}
        return self._replace(part, limits=limits)

    def _role_requests(self, role: str, mem: Any, cpu: Any, patch: bool) -> Function:
        call = f"with_{role}_requests"
        self._require_role(role, call)
        return self._requests(f"{role}_resources", call, mem, cpu, patch)

    def _role_limits(
        self, role: str, mem: Any, cpu: Any, gpus: Any, gpu_type: str, patch: bool
    ) -> Function:
        call = f"with_{role}_limits"
        self._require_role(role, call)
        return self._limits(f"{role}_resources", call, mem, cpu, gpus, gpu_type, patch)

    def _require_role(self, role: str, call: str) -> None:
        owner = ROLES[role]
        if self.kind.value != owner:
            raise ConflictError(
                call,
                f"{role}s belong to {owner} functions, this one is kind={self.kind.value!r} "
                f"(example: new_function('x', kind={owner!r}).{call}(...))",
            )

    # -- dask -------------------------------------------------------------------------------

    def with_worker_requests(
        self, mem: Any = None, cpu: Any = None, patch: bool = False
    ) -> Function:
        """What each dask worker reserves."""
        return self._role_requests("worker", mem, cpu, patch)

    def with_worker_limits(
        self,
        mem: Any = None,
        cpu: Any = None,
        gpus: Any = None,
        gpu_type: str = names.GPU,
        patch: bool = False,
    ) -> Function:
        """The most each dask worker may use; its memory limit is dask's ``memory_limit``."""
        return self._role_limits("worker", mem, cpu, gpus, gpu_type, patch)

    def with_scheduler_requests(
        self, mem: Any = None, cpu: Any = None, patch: bool = False
    ) -> Function:
        """What the dask scheduler reserves."""
        return self._role_requests("scheduler", mem, cpu, patch)

    def with_scheduler_limits(
        self,
        mem: Any = None,
        cpu: Any = None,
        gpus: Any = None,
        gpu_type: str = names.GPU,
        patch: bool = False,
    ) -> Function:
        """The most the dask scheduler may use."""
        return self._role_limits("scheduler", mem, cpu, gpus, gpu_type, patch)

    # -- spark ------------------------------------------------------------------------------

    def with_driver_requests(
        self, mem: Any = None, cpu: Any = None, patch: bool = False
    ) -> Function:
        """What the spark driver reserves."""
        return self._role_requests("driver", mem, cpu, patch)

    def with_driver_limits(
        self,
        mem: Any = None,
        cpu: Any = None,
        gpus: Any = None,
        gpu_type: str = names.GPU,
        patch: bool = False,
    ) -> Function:
        """The most the spark driver may use."""
        return self._role_limits("driver", mem, cpu, gpus, gpu_type, patch)

    def with_executor_requests(
        self, mem: Any = None, cpu: Any = None, patch: bool = False
    ) -> Function:
        """What each spark executor reserves."""
        return self._role_requests("executor", mem, cpu, patch)

    def with_executor_limits(
        self,
        mem: Any = None,
        cpu: Any = None,
        gpus: Any = None,
        gpu_type: str = names.GPU,
        patch: bool = False,
    ) -> Function:
        """The most each spark executor may use."""
        return self._role_limits("executor", mem, cpu, gpus, gpu_type, patch)


def compute_quantities(mem: Any, cpu: Any, call: str) -> dict[str, Any]:
    """The memory and CPU a ``with_*requests/limits`` call gives, each checked as a quantity."""
    given: dict[str, Any] = {}
    if mem is not None:
        parse_quantity(f"{call}(mem=...)", mem, "memory")
        given["memory"] = mem
    if cpu is not None:
        parse_quantity(f"{call}(cpu=...)", cpu, "cpu")
        given["cpu"] = cpu
    return given

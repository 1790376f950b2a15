"""A person's resize of a running run (``runplane resize RUN --mem 4Gi --cpu 2``, the API, the
run page): checked here, for every runtime alike, then carried out in place by the runtime
(:meth:`Runtime.resize`), which refuses what its node cannot grant.

Only a running job is resized: a waiting run is not placed yet (its function's next run takes
new sizes), a finished one has nothing left to resize, and a kind of several processes or pods
has no one limit to change.
"""

from __future__ import annotations

from typing import Any

from runplane.errors import InvalidValueError, MissingValueError, ResizeRefusedError
from runplane.runs import ResizeRecord, RunRecord, RunState
from runplane.runtimes.contract import Runtime
from runplane.spec.kinds import FunctionKind, check_kind
from runplane.spec.quantity import parse_quantity, resource_amount

#: The largest memory and CPU a resize may ask for: far above any node, refused by it anyway,
#: yet bounded so that no figure overflows what is stored.
MAX_MEMORY = 1 << 50
MAX_CPU = 10_000_000
EXAMPLE = "runplane resize RUN --mem 4Gi --cpu 2"


def amounts(memory: Any, cpu: Any) -> tuple[int | None, int | None]:
    """The memory (bytes) and CPU (millicores) asked for, checked; at least one."""
    if memory is None and cpu is None:
        raise MissingValueError("mem", None, "give a new memory limit, CPU limit or both", EXAMPLE)
    memory_to = cpu_to = None
    if memory is not None:
        parse_quantity("mem", memory, "memory")
        memory_to = resource_amount("memory", memory)
        if not 1 << 20 <= memory_to <= MAX_MEMORY:
            raise InvalidValueError("mem", memory, "between 1Mi and 1Pi", "--mem 4Gi")
    if cpu is not None:
        parse_quantity("cpu", cpu, "cpu")
        cpu_to = resource_amount("cpu", cpu)
        if not 1 <= cpu_to <= MAX_CPU:
            raise InvalidValueError("cpu", cpu, "between 1m and 10000 cores", "--cpu 2")
    return memory_to, cpu_to


def resize(runtime: Runtime, record: RunRecord, memory: Any, cpu: Any, by: str) -> ResizeRecord:
    """Resize the running run ``record`` in place as ``by`` asks; refused with the reason
    where its state or kind cannot be resized (the runtime refuses what its node cannot)."""
    memory_to, cpu_to = amounts(memory, cpu)
    if record.state.terminal:
        raise ResizeRefusedError(
            f"run {record.uid} has ended ({record.state.value}); only a running run is resized"
        )
    if record.state is not RunState.RUNNING:
        raise ResizeRefusedError(
            f"run {record.uid} is {record.state.value}, not running; a run is resized once it "
            "runs (its function's limits size the runs that wait)"
        )
    kind = check_kind(record.function.get("kind") or "job")
    if kind is not FunctionKind.JOB:
        raise ResizeRefusedError(
            f"run {record.uid} is of kind {kind.value}, with several processes or pods; only a "
            "job is resized in place (change its function's limits for its next run)"
        )
    return runtime.resize(record.uid, memory_to, cpu_to, by, f"asked by {by or 'a person'}")

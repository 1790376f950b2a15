"""This machine as one Kubernetes-like node: what it can hold, its labels, its GPUs.

Capacity is what this process may really use: the CPUs it is allowed to run on and any
cgroup CPU quota, the smaller of physical memory and a cgroup memory limit, and the GPUs
``nvidia-smi`` lists. Configuration can pin each (tests and shared machines do).

Labels are the configured ones (``local.node_labels``, else the hostname and the spot preset's
on-demand labels) with the changes an admin made since (:func:`store_label_change`) laid over
them. The changes are kept in ``local.home``, beside the capacity ledger, so every runplane
process that runs here (the service, the SDK, a CLI) places runs on the same labels, and a
restart keeps them.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runplane import names
from runplane.config import Settings
from runplane.errors import ConfigError
from runplane.placement import Node
from runplane.placement.model import DEFAULT_MAX_PODS
from runplane.runtimes.labelling import relabelled
from runplane.spec.quantity import resource_amount, whole_cores

#: Linux reports "no limit" as a huge number; anything above this is no limit.
_UNLIMITED = 1 << 60


@dataclass(frozen=True, slots=True)
class LocalCapacity:
    cpu_ids: tuple[int, ...]
    millicores: int
    memory_bytes: int
    gpu_ids: tuple[str, ...]


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cgroup_cpu_quota() -> float | None:
    """Cores allowed by a CPU quota (cgroup v2 ``cpu.max`` or v1 ``cfs_quota_us``), if any."""
    v2 = _read("/sys/fs/cgroup/cpu.max")
    if v2:
        quota, _, period = v2.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
    quota_v1 = _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    period_v1 = _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if quota_v1 and period_v1 and int(quota_v1) > 0:
        return int(quota_v1) / int(period_v1)
    return None


def _cgroup_memory_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        value = _read(path)
        if value and value != "max" and int(value) < _UNLIMITED:
            return int(value)
    return None


def _physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def detect_gpus() -> tuple[str, ...]:
    """GPU indices from ``nvidia-smi``; none when it is missing or fails."""
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in done.stdout.splitlines() if line.strip())


def detect_capacity(settings: Settings) -> LocalCapacity:
    local = settings.local
    cpu_ids = tuple(sorted(os.sched_getaffinity(0)))
    if local.cpu is not None:
        millicores = resource_amount("cpu", local.cpu)
    else:
        cores = float(len(cpu_ids))
        quota = _cgroup_cpu_quota()
        millicores = int(min(cores, quota) * 1000) if quota else int(cores * 1000)
    if local.memory is not None:
        memory = resource_amount("memory", local.memory)
    else:
        limit = _cgroup_memory_limit()
        memory = min(_physical_memory(), limit) if limit else _physical_memory()
    if local.gpus is not None:
        gpu_ids = tuple(str(index) for index in range(local.gpus))
    else:
        gpu_ids = detect_gpus()
    # Cores that runs can be pinned to: as many as the capacity covers.
    usable = max(1, min(len(cpu_ids), whole_cores(millicores)))
    return LocalCapacity(cpu_ids[:usable], millicores, memory, gpu_ids)


#: Where the labels an admin changed are kept, in ``local.home``.
LABELS_FILE = "node-labels.json"


def configured_labels(settings: Settings) -> dict[str, str]:
    if settings.local.node_labels is not None:
        return dict(settings.local.node_labels)
    return {"kubernetes.io/hostname": NODE_NAME, **settings.spot.on_demand_labels}


def stored_label_changes(settings: Settings) -> dict[str, str | None]:
    """The changes made to this machine's labels since it was configured (``None``: removed)."""
    path = settings.local.home / LABELS_FILE
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path}: this machine's node labels cannot be read: {error}") from None
    if not isinstance(stored, dict) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in stored.items()
    ):
        raise ConfigError(f"{path}: not a mapping of label keys to values or null")
    return stored


def store_label_change(settings: Settings, change: Mapping[str, str | None]) -> None:
    """Lay ``change`` (already checked) over the stored changes, atomically: a reader sees the
    old labels or the new ones, never a half-written file."""
    path = settings.local.home / LABELS_FILE
    changes = {**stored_label_changes(settings), **change}
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f".{LABELS_FILE}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(changes, file, sort_keys=True)
    os.replace(partial, path)


def node_labels(settings: Settings) -> dict[str, str]:
    """This machine's labels now: the configured ones with the stored changes laid over."""
    return relabelled(configured_labels(settings), stored_label_changes(settings))


#: The name this machine has as a node.
NODE_NAME = socket.gethostname().split(".")[0].lower() or "localhost"


def local_node(settings: Settings, capacity: LocalCapacity | None = None) -> Node:
    """This machine as a placement node, empty (nothing reserved yet)."""
    capacity = capacity or detect_capacity(settings)
    allocatable = {
        "cpu": capacity.millicores,
        "memory": capacity.memory_bytes,
        "pods": DEFAULT_MAX_PODS,
    }
    if capacity.gpu_ids:
        allocatable[names.GPU] = len(capacity.gpu_ids)
    return Node(name=NODE_NAME, labels=node_labels(settings), allocatable=allocatable)

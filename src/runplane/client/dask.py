"""A dask function's cluster on this machine: ``fn.client`` and ``fn.close()``.

The cluster is ``distributed.LocalCluster`` in worker processes (each under a nanny): the
worker resources' memory limit is each worker's ``memory_limit`` (dask's nanny restarts a worker
that passes it and the scheduler records that in its event log), the CPU limit is its thread
count unless ``spec.nthreads`` says otherwise, and with ``min_replicas``/``max_replicas`` the
cluster adapts between them (``cluster.adapt``). It lives as long as this process, or until
``fn.close()``; the dashboard's address is printed when it starts.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from typing import Any

from runplane.config import Settings
from runplane.errors import InvalidValueError
from runplane.rendering import Quantities, effective_resources
from runplane.rendering.dask import worker_threads
from runplane.spec.function import Function, FunctionKind, require_kind

_clusters: dict[tuple[str, str], tuple[Any, Any]] = {}
_lock = threading.Lock()


def _key(fn: Function) -> tuple[str, str]:
    return fn.metadata.project, fn.metadata.name


def dask_client(fn: Function, settings: Settings) -> Any:
    """The function's ``distributed.Client``, starting its cluster on first use."""
    require_kind(
        fn,
        FunctionKind.DASK,
        "fn.client belongs to dask functions",
        "runplane.new_function('cluster', kind='dask').client",
    )
    if settings.api:
        raise InvalidValueError(
            "RUNPLANE_API",
            settings.api,
            "dask clusters through the service are not supported yet; unset RUNPLANE_API to "
            "run the cluster on this machine",
        )
    with _lock:
        if _key(fn) in _clusters:
            return _clusters[_key(fn)][1]
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise InvalidValueError(
                "kind",
                "dask",
                "dask functions need dask's distributed package here",
                "pip install 'runplane[dask]'",
            ) from None
        _, limits, _ = effective_resources(fn, settings, "worker")
        spec = fn.spec
        memory = Quantities.of(limits).memory or 0
        start = spec.replicas if spec.replicas is not None else (spec.min_replicas or 1)
        if spec.max_replicas is not None:
            start = min(max(start, spec.min_replicas or 1), spec.max_replicas)
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            name=fn.metadata.name,
            n_workers=start,
            threads_per_worker=worker_threads(spec.nthreads, limits),
            memory_limit=memory,
            processes=True,
            dashboard_address=f"{settings.serving.local_host}:0",
            silence_logs=logging.ERROR,
        )
        if spec.max_replicas is not None:
            cluster.adapt(minimum=spec.min_replicas or 1, maximum=spec.max_replicas)
        client = Client(cluster)  # type: ignore[no-untyped-call]
        _clusters[_key(fn)] = (cluster, client)
        if len(_clusters) == 1:
            atexit.register(close_all)
    sys.stdout.write(f"dask cluster {fn.metadata.name}: dashboard {cluster.dashboard_link}\n")
    sys.stdout.flush()
    return client


def close(fn: Function) -> None:
    """Stop the function's cluster here, if it has one."""
    with _lock:
        found = _clusters.pop(_key(fn), None)
    if found is not None:
        cluster, client = found
        client.close()
        cluster.close()


def close_all() -> None:
    with _lock:
        found = list(_clusters.values())
        _clusters.clear()
    for cluster, client in found:
        client.close()
        cluster.close()

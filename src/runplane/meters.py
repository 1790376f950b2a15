"""Counts of the units of work runs cost: requests to the cluster, watch events, SQL
statements, placement evaluations.

Time per run depends on the machine and on what else runs on it; these counts do not. CI holds
a budget on each per run (``tests/integration/test_run_costs.py``), so work that creeps into
the path of every run (a request repeated per pod, a query per event) fails a test on any
machine, and the service exports them for Prometheus (``GET /api/v1/metrics``).

Counting is a dictionary increment in the counting thread's own counter, with no lock: the
service's threads count a dozen times a run each, and one lock for all of them was contended
(a thread waiting on it sleeps and is woken). Reading the counts adds every thread's up, those
of threads that ended included. Nothing here imports more than the standard library, so the
modules that count stay as cheap to import as they were.
"""

from __future__ import annotations

import threading
from collections import Counter

#: Each meter's name and what it counts (the Prometheus help text).
METERS = {
    "kube_requests": "Requests sent to the Kubernetes API server, by method and resource",
    "kube_watch_events": "Events read from Kubernetes watches, by watch",
    "sql_statements": "SQL statements run on the service's database, by kind",
    "placement_evaluations": "Pods evaluated against a node by the placement rules",
}

Labels = tuple[tuple[str, str], ...]

#: Every thread's counter, as each first counted (kept when the thread ends: counts only grow).
_counters: list[Counter[tuple[str, Labels]]] = []
_registering = threading.Lock()
_local = threading.local()


def _own() -> Counter[tuple[str, Labels]]:
    counter: Counter[tuple[str, Labels]] = Counter()
    with _registering:
        _counters.append(counter)
    _local.counter = counter
    return counter


def count(meter: str, labels: Labels = (), units: int = 1) -> None:
    """``units`` more of ``meter`` (a name of :data:`METERS`) with these labels."""
    counter = getattr(_local, "counter", None) or _own()
    counter[meter, labels] += units


def counts() -> dict[tuple[str, Labels], int]:
    """Every count so far, by meter and labels."""
    with _registering:
        counters = list(_counters)
    total: Counter[tuple[str, Labels]] = Counter()
    for counter in counters:
        total.update(counter.copy())  # a copy taken whole, as its thread goes on counting
    return dict(total)

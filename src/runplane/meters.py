"""Counts of the units of work runs cost: requests to the cluster, watch events, SQL
statements, placement evaluations.

Time per run depends on the machine and on what else runs on it; these counts do not. CI holds
a budget on each per run (``tests/integration/test_run_costs.py``), so work that creeps into
the path of every run (a request repeated per pod, a query per event) fails a test on any
machine, and the service exports them for Prometheus (``GET /api/v1/metrics``).

Counting is a dictionary increment under a lock; nothing here imports more than the standard
library, so the modules that count stay as cheap to import as they were.
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

_lock = threading.Lock()
_counts: Counter[tuple[str, Labels]] = Counter()


def count(meter: str, labels: Labels = (), units: int = 1) -> None:
    """``units`` more of ``meter`` (a name of :data:`METERS`) with these labels."""
    with _lock:
        _counts[meter, labels] += units


def counts() -> dict[tuple[str, Labels], int]:
    """Every count so far, by meter and labels."""
    with _lock:
        return dict(_counts)

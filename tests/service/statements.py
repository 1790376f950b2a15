"""SQL statements a test counts, by kind (``BEGIN`` left out: PostgreSQL's driver begins
without one), from the threads it picks: another thread's statements (the service's monitor
polling, a thread a test before left running) come at their own times and would fall inside
the counted window now and then."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from runplane import meters


class Statements:
    """Counts from now on, for the rest of the test, the statements of the threads
    ``counted`` picks."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, counted: Callable[[threading.Thread], bool]
    ) -> None:
        self._sent: Counter[str] = Counter()
        count = meters.count

        def counting(meter: str, labels: meters.Labels = (), units: int = 1) -> None:
            kind = dict(labels).get("kind")
            if (
                meter == "sql_statements"
                and kind != "BEGIN"
                and counted(threading.current_thread())
            ):
                self._sent[str(kind)] += units
            count(meter, labels, units)

        monkeypatch.setattr(meters, "count", counting)

    def by_kind(self) -> Counter[str]:
        return Counter(self._sent)

    def total(self) -> int:
        return sum(self._sent.values())


def this_thread() -> Callable[[threading.Thread], bool]:
    """The calling thread alone (a test driving a store itself)."""
    mine = threading.current_thread()
    return lambda thread: thread is mine


def outside_the_service(thread: threading.Thread) -> bool:
    """Every thread but the service's own (``runplane-*``: the monitor's polls, the recorder,
    retention): those answering requests."""
    return not thread.name.startswith("runplane-")

"""A run's memory and CPU over time: sampled while it runs, kept bounded, stored apart.

A thread of its own asks the runtime what the running runs use (:meth:`Runtime.usages`, the
cgroups' counters on the embedded default, the kubelets' summaries on a cluster), all of them
in one call, every :data:`INTERVAL` seconds, and writes a run's series at most every
:data:`FLUSH` seconds, one upsert of one row per run: the recorder's transactions never wait
on it, and a run the runtime cannot tell about is left out (on a cluster, a node that cannot
tell costs one question per look, not one per run, and none where no node can). A series
holds at most :data:`POINTS` points: when full, neighbouring pairs merge (the higher memory,
the later CPU time) and the run is sampled half as often, so a long run's series spans its
whole life at a coarser grain, and a short one keeps every point.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from runplane.runs import Usage
from runplane.service.db.models import USAGE

log = logging.getLogger(__name__)

#: Seconds between two looks at the running runs.
INTERVAL = 0.5
#: Seconds between two writes of a run's series (and once more when it ends).
FLUSH = 2.0
#: The most points one run keeps.
POINTS = 120

_TABLE = USAGE


@dataclass(frozen=True, slots=True)
class Sample:
    """At ``at`` (epoch seconds): the memory held, and the CPU seconds used since the start."""

    at: float
    memory_bytes: int
    cpu_seconds: float


@dataclass(slots=True)
class Series:
    """One run's samples, at most ``limit``; every ``stride``-th look is kept."""

    limit: int = POINTS
    points: list[Sample] = field(default_factory=list)
    stride: int = 1
    _looks: int = 0
    #: The most memory seen by the looks the stride skipped since the last point kept.
    _skipped: int = 0

    def add(self, sample: Sample) -> bool:
        """Keep ``sample`` if this look is one the stride keeps, with the highest memory of
        the looks skipped before it (a peak is never lost); whether it was kept."""
        self._looks += 1
        memory = max(self._skipped, sample.memory_bytes)
        if self._looks % self.stride:
            self._skipped = memory
            return False
        self._skipped = 0
        self.points.append(Sample(sample.at, memory, sample.cpu_seconds))
        if len(self.points) > self.limit:
            self._halve()
        return True

    def _halve(self) -> None:
        """Merge neighbours: the pair's higher memory (a peak is never lost), its later
        time and CPU time (cumulative, so the later is the pair's)."""
        pairs = zip(self.points[0::2], self.points[1::2], strict=False)
        merged = [
            Sample(b.at, max(a.memory_bytes, b.memory_bytes), b.cpu_seconds) for a, b in pairs
        ]
        if len(self.points) % 2:
            merged.append(self.points[-1])
        self.points = merged
        self.stride *= 2


def sample_of(usage: Usage, at: float) -> Sample:
    """What a look at ``usage`` records: the memory held now, or the peak where the runtime
    knows only that."""
    return Sample(at, usage.memory_bytes or usage.peak_memory_bytes, usage.cpu_seconds)


def encode(points: Iterable[Sample]) -> list[list[float]]:
    return [[round(p.at, 3), p.memory_bytes, round(p.cpu_seconds, 4)] for p in points]


def decode(rows: Any) -> list[Sample]:
    """Samples from what :func:`encode` stored; anything else reads as none."""
    if not isinstance(rows, list):
        return []
    return [
        Sample(float(row[0]), int(row[1]), float(row[2]))
        for row in rows
        if isinstance(row, list) and len(row) == 3
    ]


class UsageStore:
    """The stored series, one row per run (deleted with its run)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # Built once: the sampler writes every FLUSH seconds while runs run, and building and
        # compiling the upsert cost as much as executing it.
        insert = postgresql.insert if engine.dialect.name == "postgresql" else sqlite.insert
        new = insert(_TABLE)
        self._upsert = new.on_conflict_do_update(
            index_elements=[_TABLE.c.run_uid], set_={"points": new.excluded.points}
        )

    def save(self, series: dict[str, list[Sample]]) -> None:
        if not series:
            return
        rows = [
            {"run_uid": uid, "points": orjson.dumps(encode(p)).decode()}
            for uid, p in series.items()
        ]
        with self._engine.begin() as connection:
            connection.execute(self._upsert, rows)

    def read(self, uid: str) -> list[Sample]:
        query = select(_TABLE.c.points).where(_TABLE.c.run_uid == uid)
        with self._engine.connect() as connection:
            text = connection.execute(query).scalar()
        return decode(orjson.loads(text)) if text else []


class UsageSampler:
    """Samples the runs ``running`` names through ``usages`` until :meth:`close`."""

    def __init__(
        self,
        store: UsageStore,
        running: Callable[[], Iterable[str]],
        usages: Callable[[Iterable[str]], Mapping[str, Usage]],
        interval: float = INTERVAL,
    ) -> None:
        self._store, self._running, self._usages = store, running, usages
        self._interval = interval
        self._series: dict[str, Series] = {}
        self._dirty: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="runplane-usage", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop, writing what was sampled since the last write."""
        self._stop.set()
        if self._thread is None:
            return
        self._thread.join(timeout=10)
        self._thread = None
        try:
            self.flush()
        except Exception:
            log.exception("writing runs' usage at the stop failed")

    def points(self, uid: str) -> list[Sample] | None:
        """The series held in memory for a run sampled here now (``None``: not sampled here)."""
        with self._lock:
            series = self._series.get(uid)
            return None if series is None else list(series.points)

    def _loop(self) -> None:
        flushed = time.monotonic()
        while not self._stop.wait(self._interval):
            try:
                ended = self.look()
                if ended or time.monotonic() - flushed >= FLUSH:
                    flushed = time.monotonic()
                    self.flush(ended)
            except Exception:  # a failed look or write must not end the sampling
                log.exception("sampling runs' usage failed")

    def look(self) -> set[str]:
        """One look at every running run, one read of each; returns the runs sampled before
        that are gone."""
        uids = set(self._running())
        now = time.time()
        looked = self._usages(uids)
        with self._lock:
            for uid, usage in looked.items():
                series = self._series.get(uid)
                if series is None:
                    series = self._series[uid] = Series()
                if series.add(sample_of(usage, now)):
                    self._dirty.add(uid)
            return set(self._series) - uids

    def flush(self, ended: Iterable[str] = ()) -> None:
        """Write the series that changed, and forget the runs that ended once written."""
        with self._lock:
            changed = {uid: list(self._series[uid].points) for uid in self._dirty}
            self._dirty.clear()
        self._store.save(changed)
        with self._lock:
            for uid in ended:
                self._series.pop(uid, None)

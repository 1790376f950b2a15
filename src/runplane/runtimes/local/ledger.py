"""The capacity ledger: which runs on this machine hold which resources, across processes.

Two ``runplane run`` commands started at once must not overbook the machine, so every grant is
decided inside one SQLite ``BEGIN IMMEDIATE`` transaction (one writer at a time, any process).
The ledger is coordination state, not a record: each claim names the process that owns it, and
claims of processes that no longer exist are dropped at the next transaction, so a crash never
leaves capacity held.

Granting follows kube-scheduler's queue: waiting claims are taken by priority, then submit time;
a claim that does not fit now is passed over (it does not block smaller ones behind it), and
capacity a higher claim would take is not given to a lower one.

Project quotas (:mod:`runplane.placement.quotas`) are decided in the same transaction: a claim
its project's quota cannot hold now waits, saying so, and holds no capacity; claims within
their project's nominal quota are taken before claims that would borrow idle quota of other
projects, so a lender gets its quota back as borrowers' runs end (nothing is preempted).

The quota table is shared as the claims are: a process that is handed a new table
(:meth:`Ledger.set_quotas`: its service's, at start and after an admin's change) writes it to
the ledger with its generation raised by one, and every transaction that decides by quotas
reads the generation in the statement it needs anyway, and the table only when the generation
differs from the one it holds. So a change made by any process on the machine takes effect in
every other at its next admission, and a table that did not change costs no parsing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from runplane.placement import Node
from runplane.placement.quotas import (
    ON_DEMAND,
    ProjectQuota,
    QuotaBook,
    QuotaTable,
    quota_text,
    waiting_text,
)
from runplane.runtimes.local.resize import QuotaShort

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    uid TEXT PRIMARY KEY,
    granted INTEGER NOT NULL DEFAULT 0,
    priority INTEGER NOT NULL,
    submitted REAL NOT NULL,
    requests TEXT NOT NULL,
    cores INTEGER NOT NULL,
    gpus INTEGER NOT NULL,
    cpu_ids TEXT NOT NULL DEFAULT '[]',
    gpu_ids TEXT NOT NULL DEFAULT '[]',
    owner_pid INTEGER NOT NULL,
    owner_started REAL NOT NULL,
    project TEXT NOT NULL DEFAULT '',
    flavor TEXT NOT NULL DEFAULT 'on-demand'
)
"""
#: The machine's project quotas: one row, the table (JSON) and its generation.
_QUOTAS = """
CREATE TABLE IF NOT EXISTS quotas (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL,
    quota_table TEXT NOT NULL
)
"""
#: The generation, and the table only when it is not the one the caller holds.
_READ_QUOTAS = (
    "SELECT generation, CASE WHEN generation = ? THEN NULL ELSE quota_table END FROM quotas"
)
#: Columns a ledger file made before project quotas lacks, added when it is opened.
_ADDED = {
    "project": "TEXT NOT NULL DEFAULT ''",
    "flavor": "TEXT NOT NULL DEFAULT 'on-demand'",
}


@dataclass(frozen=True, slots=True)
class Claim:
    """What one run asks of the machine while it waits or runs."""

    uid: str
    priority: int
    submitted: float
    requests: Mapping[str, int]
    #: Cores to confine the run to (0: not confined).
    cores: int
    gpus: int
    #: The run's project and the flavor of capacity it takes (this machine's), which its
    #: project's quota counts it against.
    project: str = ""
    flavor: str = ON_DEMAND


@dataclass(frozen=True, slots=True)
class Grant:
    uid: str
    cpu_ids: tuple[int, ...]
    gpu_ids: tuple[str, ...]


def _process_started(pid: int) -> float | None:
    """When ``pid`` started; ``None`` if it is gone (a zombie is gone: it runs nothing)."""
    try:
        process = psutil.Process(pid)
        return None if process.status() == psutil.STATUS_ZOMBIE else process.create_time()
    except psutil.Error:
        return None


_OWNER = (os.getpid(), _process_started(os.getpid()) or 0.0)


class Ledger:
    """One machine's claims, in a SQLite file shared by every runplane process on it."""

    def __init__(
        self,
        path: Path,
        node: Node,
        cpu_ids: Iterable[int],
        gpu_ids: Iterable[str],
        held_to_quotas: bool = True,
    ) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.exists():
            path.touch(mode=0o600)
        self._connection = sqlite3.connect(
            path, timeout=30, isolation_level=None, check_same_thread=False
        )
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=NORMAL")
        self._connection.execute(_SCHEMA)
        self._connection.execute(_QUOTAS)
        columns = {row[1] for row in self._connection.execute("PRAGMA table_info(claims)")}
        for column, kind in _ADDED.items():
            if column not in columns:
                with contextlib.suppress(sqlite3.OperationalError):  # another process did
                    self._connection.execute(f"ALTER TABLE claims ADD COLUMN {column} {kind}")
        # One connection per process, shared by its threads: one operation at a time.
        self._lock = threading.RLock()
        self._node = node
        self._cpu_ids = tuple(cpu_ids)
        self._gpu_ids = tuple(gpu_ids)
        #: Every project's quotas, as the ledger held them at this process's last
        #: transaction that decided by them, and that table's generation (-1: none read).
        self.quotas: QuotaTable = {}
        self._generation = -1
        #: Whether this process's claims wait for the machine's quota table (a serving
        #: deployment's replicas do not: they count against their project's quota only).
        self._held_to_quotas = held_to_quotas
        #: Why each claim of this process's waits for quota, as the last grant found.
        self.quota_waits: dict[str, str] = {}

    def close(self) -> None:
        self._connection.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                yield self._connection
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    def set_quotas(self, quotas: QuotaTable) -> None:
        """Make ``quotas`` every project's on this machine, for every process's next
        admission (a table equal to the ledger's changes nothing)."""
        written = json.dumps(
            {project: quota.to_json() for project, quota in sorted(quotas.items())},
            sort_keys=True,
        )
        with self._transaction() as connection:
            row = connection.execute("SELECT generation, quota_table FROM quotas").fetchone()
            if row is not None and row[1] == written:
                generation = row[0]
            else:
                generation = (row[0] if row is not None else 0) + 1
                connection.execute(
                    "INSERT OR REPLACE INTO quotas (id, generation, quota_table) VALUES (1, ?, ?)",
                    (generation, written),
                )
        self.quotas, self._generation = dict(quotas), generation

    def _read_quotas(self, connection: sqlite3.Connection) -> None:
        """Take the machine's quota table if another process changed it since the last read
        (one row's generation read; the table parsed only when it changed)."""
        if not self._held_to_quotas:
            return
        row = connection.execute(_READ_QUOTAS, (self._generation,)).fetchone()
        if row is None or row[0] == self._generation:
            return
        self._generation = row[0]
        try:
            table = json.loads(row[1])
            self.quotas = {project: ProjectQuota.from_json(q) for project, q in table.items()}
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            # A table this runplane cannot read (a newer one's fields, a damaged row) must not
            # stop every admission on the machine: the table held is kept until the next one.
            log.warning(
                "the machine's quota table (generation %s) could not be read, the one "
                "held is kept: %s",
                row[0],
                error,
            )

    def wait(self, claim: Claim) -> None:
        """Queue ``claim``; it is granted by a later :meth:`grant`."""
        self.settle([claim], [], [])

    def release(self, uid: str) -> None:
        self.settle([], [uid], [])

    def grant(self, mine: Iterable[str]) -> list[Grant]:
        """Grant every claim of ``mine`` that the queue reaches and the machine can hold now."""
        return self.settle([], [], mine)

    def settle(
        self, claims: Iterable[Claim], released: Iterable[str], mine: Iterable[str]
    ) -> list[Grant]:
        """In one transaction: drop the ``released`` claims, queue ``claims``, then grant every
        claim of ``mine`` that the queue reaches and the machine can hold now. A runtime's
        scheduler settles everything that happened since its last turn at once, so a burst of
        runs costs a transaction per turn, not three per run."""
        rows = [
            (
                claim.uid,
                claim.priority,
                claim.submitted,
                json.dumps(dict(claim.requests)),
                claim.cores,
                claim.gpus,
                *_OWNER,
                claim.project,
                claim.flavor,
            )
            for claim in claims
        ]
        gone = [(uid,) for uid in released]
        wanted = set(mine)
        if not (rows or gone or wanted):
            return []
        with self._transaction() as connection:
            connection.executemany("DELETE FROM claims WHERE uid = ?", gone)
            connection.executemany(
                "INSERT OR REPLACE INTO claims (uid, priority, submitted, requests, cores, gpus,"
                " owner_pid, owner_started, project, flavor) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            return self._grant(connection, wanted) if wanted else []

    def _grant(self, connection: sqlite3.Connection, wanted: set[str]) -> list[Grant]:
        rows = connection.execute(
            "SELECT uid, granted, priority, submitted, requests, cores, gpus, cpu_ids,"
            " gpu_ids, owner_pid, owner_started, project, flavor FROM claims"
        ).fetchall()
        self._read_quotas(connection)
        live = []
        for row in rows:
            if (row[9], row[10]) != _OWNER and _process_started(row[9]) != row[10]:
                connection.execute("DELETE FROM claims WHERE uid = ?", (row[0],))
            else:
                live.append(row)
        free = dict(self._node.allocatable)
        pods = free.pop("pods", 0)
        core_load = dict.fromkeys(self._cpu_ids, 0)
        used_gpus: set[str] = set()
        book = QuotaBook(self.quotas)
        for row in live:
            if row[1]:
                requests = json.loads(row[4])
                for name, amount in requests.items():
                    free[name] = free.get(name, 0) - amount
                for cpu in json.loads(row[7]):
                    core_load[cpu] = core_load.get(cpu, 0) + 1
                used_gpus.update(json.loads(row[8]))
                pods -= 1
                book.add(row[11], row[12], requests)
        grants = []
        queues = {row[0]: (row[11], row[12]) for row in live}
        quotas = bool(self.quotas)
        asked = {row[0]: json.loads(row[4]) for row in live if not row[1]}
        borrowing = (
            {uid: book.borrows(*queues[uid], requests) for uid, requests in asked.items()}
            if quotas
            else {}
        )
        waiting = sorted(
            (r for r in live if not r[1]),
            key=lambda r: (borrowing.get(r[0], False), -r[2], r[3], r[0]),
        )
        ahead: dict[tuple[str, str], int] = {}
        waits: dict[str, str] = {}
        for row in waiting:
            requests = asked[row[0]]
            queue = (row[11], row[12])
            short = book.shortfall(*queue, requests) if quotas else {}
            if short:
                if row[0] in wanted:  # worded for this process's own runs only
                    waits[row[0]] = waiting_text(*queue, short, ahead.get(queue, 0))
                ahead[queue] = ahead.get(queue, 0) + 1
                if not borrowing.get(row[0], False):
                    # Its own quota, lent while it was idle: nobody borrows more of it, and
                    # it is given back as the borrowers' runs end (nothing is preempted).
                    book.add(*queue, requests)
                continue
            if pods < 1 or any(amount > free.get(name, 0) for name, amount in requests.items()):
                ahead[queue] = ahead.get(queue, 0) + 1
                continue
            for name, amount in requests.items():
                free[name] = free.get(name, 0) - amount
            pods -= 1
            book.add(*queue, requests)
            if row[0] not in wanted:
                continue  # a claim ahead of ours takes this capacity when its owner asks
            cpu_ids = sorted(core_load, key=lambda c: (core_load[c], c))[: row[5]]
            for cpu in cpu_ids:
                core_load[cpu] += 1
            gpu_ids = [g for g in self._gpu_ids if g not in used_gpus][: row[6]]
            used_gpus.update(gpu_ids)
            connection.execute(
                "UPDATE claims SET granted = 1, cpu_ids = ?, gpu_ids = ? WHERE uid = ?",
                (json.dumps(cpu_ids), json.dumps(gpu_ids), row[0]),
            )
            grants.append(Grant(row[0], tuple(cpu_ids), tuple(gpu_ids)))
        self.quota_waits = waits
        return grants

    def grow(self, uid: str, more: Mapping[str, int]) -> str:
        """Add ``more`` (negative: less) to a granted claim's requests if the machine's
        unreserved capacity holds it (a running run resized in place); ``""`` when done,
        else why not, in words."""
        with self._transaction() as connection:
            rows = connection.execute(
                "SELECT uid, requests, project, flavor FROM claims WHERE granted = 1"
            ).fetchall()
            mine = next((json.loads(r) for u, r, _, _ in rows if u == uid), None)
            if mine is None:
                return "the run holds no place on this machine"
            self._read_quotas(connection)
            free = dict(self._node.allocatable)
            book = QuotaBook(self.quotas)
            queue = ("", ON_DEMAND)
            for other, requests, project, flavor in rows:
                held = json.loads(requests)
                book.add(project, flavor, held)
                if other == uid:
                    queue = (project, flavor)
                for name, amount in held.items():
                    free[name] = free.get(name, 0) - amount
            # Its project's quota holds the grown run as it holds a new one: a resize never
            # takes a project past what its quota (and what it may borrow) allows.
            short = book.shortfall(*queue, {k: v for k, v in more.items() if v > 0})
            if short:
                return QuotaShort(quota_text(*queue, short))
            for name, amount in more.items():
                if amount > free.get(name, 0):
                    left = max(free.get(name, 0), 0)
                    shown = f"{left // (1 << 20)}Mi" if name == "memory" else f"{left}m"
                    return (
                        f"this machine has {shown} of {name} unreserved, less than the "
                        f"{amount // (1 << 20) if name == 'memory' else amount}"
                        f"{'Mi' if name == 'memory' else 'm'} more asked"
                    )
            grown = {name: max(mine.get(name, 0) + more.get(name, 0), 0) for name in {*mine, *more}}
            connection.execute(
                "UPDATE claims SET requests = ? WHERE uid = ?", (json.dumps(grown), uid)
            )
        return ""

    def occupied(self) -> Node:
        """The node with what granted claims hold, for explaining why a claim waits."""
        node = Node(
            name=self._node.name,
            labels=self._node.labels,
            taints=self._node.taints,
            allocatable=dict(self._node.allocatable),
        )
        with self._lock:
            granted = self._connection.execute(
                "SELECT requests FROM claims WHERE granted = 1"
            ).fetchall()
        for (requests,) in granted:
            node.reserve(json.loads(requests))
        return node

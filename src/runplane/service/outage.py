"""Whether an error is the service's storage failing for a while, and why, in words.

A full disk, a database that is busy, unreachable or restarting, a disk that fails to write:
none of them is the caller's mistake or a bug, and each passes. The API answers them ``503``
with the reason and a ``Retry-After`` (never a ``500``), and the recorder holds the events it
could not write and writes them again once the storage takes them (:mod:`.recorder`).
Anything else (a constraint broken, a bug) is not an outage: retrying would fail the same way.
"""

from __future__ import annotations

import errno
import sqlite3

from sqlalchemy.exc import DBAPIError, OperationalError

#: Seconds a client is told to wait before trying again.
RETRY_AFTER = 5

_FULL = "the disk holding the service's data is full"

#: OS errors of a storage that cannot take a write now.
_OS: dict[int, str] = {
    errno.ENOSPC: _FULL,
    errno.EDQUOT: "the disk quota of the service's data is used up",
    errno.EIO: "the disk holding the service's data failed to read or write",
    errno.EROFS: "the disk holding the service's data is read-only",
}

#: SQLite's primary result codes (the low byte of an extended code).
_SQLITE: dict[int, str] = {
    sqlite3.SQLITE_FULL: _FULL,
    sqlite3.SQLITE_IOERR: "the run database failed to read or write its disk",
    sqlite3.SQLITE_BUSY: "the run database is busy",
    sqlite3.SQLITE_LOCKED: "the run database is busy",
    sqlite3.SQLITE_CANTOPEN: "the run database cannot be opened",
    sqlite3.SQLITE_READONLY: "the run database is read-only",
}

#: PostgreSQL's SQLSTATE classes and codes (the most specific wins).
_POSTGRES: dict[str, str] = {
    "53100": "the disk of the run database is full",
    "53200": "the run database is out of memory",
    "53300": "the run database has too many connections",
    "53": "the run database is out of resources",
    "08": "the run database cannot be reached",
    "57P01": "the run database is shutting down",
    "57P02": "the run database is restarting",
    "57P03": "the run database is starting up",
    "40P01": "the run database is busy",
    "55P03": "the run database is busy",
    "25006": "the run database is read-only",
}


def outage(error: BaseException) -> str | None:
    """Why the storage cannot serve now, when ``error`` says so (the error's own words
    added); ``None`` when it is not an outage."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        reason = _reason(current)
        if reason is not None:
            return reason
        current = current.__cause__ or current.__context__
    return None


def _reason(error: BaseException) -> str | None:
    if isinstance(error, OSError) and error.errno in _OS:
        return f"{_OS[error.errno]} ({error.strerror or error})"
    if not isinstance(error, DBAPIError):
        return None
    original = error.orig
    detail = " ".join(str(original).split())[:200]
    code = getattr(original, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _SQLITE:
        return f"{_SQLITE[code & 0xFF]} ({detail})"
    state = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if isinstance(state, str):
        for key in (state, state[:2]):
            if key in _POSTGRES:
                return f"{_POSTGRES[key]} ({detail})"
    if error.connection_invalidated:
        return f"the run database cannot be reached ({detail})"
    if isinstance(error, OperationalError):
        # The DB-API's class of failures outside the program's control: a lost connection,
        # a full disk, a lock not granted in time.
        return f"the run database cannot serve now ({detail})"
    return None

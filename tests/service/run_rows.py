"""Rows of the runs table written directly, as an older runplane or a bulk load left them:
for tests that need thousands of runs, or runs recorded before a migration."""

from __future__ import annotations

import uuid
from typing import Any


def run_row(created: float, **fields: Any) -> dict[str, Any]:
    """A finished local run of ``bob``'s in project ``default`` created at ``created``, with
    every column of the runs table as of migration 0007 set; ``fields`` overrides or adds
    columns."""
    row: dict[str, Any] = {
        "uid": uuid.uuid4().hex,
        "project": "default",
        "name": "job",
        "runtime": "local",
        "state": "completed",
        "reason": "",
        "status_text": "",
        "function": {},
        "params": {},
        "inputs": {},
        "thresholds": {},
        "priority_class": "",
        "requests": {},
        "limits": {},
        "results": {},
        "peak_memory_bytes": 0,
        "cpu_seconds": 0.0,
        "created_at": created,
        "updated_at": created,
        "state_since": created,
        "abort_requested": False,
        "owner": "bob",
    }
    row.update(fields)
    return row

"""A local run's end read from what it left behind, and storage errors told from others."""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path

from sqlalchemy.exc import IntegrityError, OperationalError

from runplane.runs import RunState
from runplane.runtimes.local.remains import end_left
from runplane.service.outage import outage


def _events(run_dir: Path, *lines: object) -> None:
    run_dir.mkdir(exist_ok=True)
    text = "".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines)
    (run_dir / "events.jsonl").write_text(text)


def test_an_exit_line_is_the_attempts_end_with_its_results(tmp_path: Path) -> None:
    _events(
        tmp_path,
        {"type": "result", "key": "n", "value": 3},
        {"type": "exit", "code": 0, "attempt": 2},
    )
    end = end_left(tmp_path, "u", 2)
    assert end is not None
    assert (end.state, end.exit_code, end.results) == (RunState.COMPLETED, 0, {"n": 3})
    assert end.at == (tmp_path / "events.jsonl").stat().st_mtime


def test_a_failed_end_says_the_handlers_error(tmp_path: Path) -> None:
    _events(
        tmp_path,
        {"type": "error", "message": "ValueError: no"},
        {"type": "exit", "code": 1, "attempt": 1},
    )
    end = end_left(tmp_path, "u", 1)
    assert end is not None
    assert (end.state, end.reason, end.exit_code) == (RunState.ERROR, "Error", 1)
    assert end.message.startswith("ValueError: no (read from the run's files")


def test_no_end_without_the_attempts_own_exit_line(tmp_path: Path) -> None:
    assert end_left(tmp_path, "u", 1) is None  # nothing written
    _events(tmp_path, {"type": "result", "key": "n", "value": 1}, '{"type": "exit", "co')
    assert end_left(tmp_path, "u", 1) is None  # killed while writing it
    _events(tmp_path, {"type": "exit", "code": 0, "attempt": 1})
    assert end_left(tmp_path, "u", 2) is None  # the attempt before's


def test_the_events_file_is_never_read_through_a_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    _events(elsewhere, {"type": "exit", "code": 0, "attempt": 1})
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "events.jsonl").symlink_to(elsewhere / "events.jsonl")
    assert end_left(tmp_path / "run", "u", 1) is None


def test_storage_outages_are_told_from_other_errors() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    assert "full" in (outage(full) or "")
    wrapped = RuntimeError("writing failed")
    wrapped.__cause__ = full
    assert "full" in (outage(wrapped) or "")
    locked = OperationalError("UPDATE", {}, sqlite3.OperationalError("database is locked"))
    assert outage(locked) is not None
    assert outage(IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE"))) is None
    assert outage(OSError(errno.EINVAL, "Invalid argument")) is None
    assert outage(ValueError("bad")) is None

"""How a run's output is copied from the pod log: the kubelet's times read exactly, a resumed
read skips what was copied, the results line kept apart. (The copy of a live pod's log, its
resume after a break and after a killed service, are shown on the real node.)"""

from __future__ import annotations

import json

import pytest

from runplane.runtimes.kubernetes.logspool import RESULTS, Cursor, _Appender, stamp_ns
from runplane.runtimes.output import OUTPUT

SECOND = 1_000_000_000


def test_times_are_read_to_the_nanosecond_whatever_their_precision():
    base = stamp_ns("2026-11-23T14:10:35Z")
    assert stamp_ns("2026-11-23T14:10:35.613895137Z") == base + 613_895_137
    assert stamp_ns("2026-11-23T14:10:35.5Z") == base + SECOND // 2  # shorter: not a float
    assert stamp_ns("2026-11-23T16:10:35.000000001+02:00") == base + 1
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        stamp_ns("yesterday")


def copy(tmp_path, cursor, lines, final=False):
    with _Appender(tmp_path, cursor) as out:
        for at, text in lines:
            if out.fresh(at):
                out.write(at, text)
        out.finish(final)
    return (tmp_path / OUTPUT).read_bytes()


def test_a_resumed_read_skips_the_lines_it_copied_and_no_others(tmp_path):
    cursor = Cursor(pod="p")
    first = [(5, b"a\n"), (7, b"b\n"), (7, b"c\n")]
    assert copy(tmp_path, cursor, first) == b"a\nb\nc\n"
    assert (cursor.at, cursor.seen, cursor.size) == (7, 2, 6)
    # A resume reads from the whole second again: what it has seen is skipped, the third
    # line with the same time is not.
    again = [*first, (7, b"d\n"), (9, b"e\n")]
    assert copy(tmp_path, cursor, again) == b"a\nb\nc\nd\ne\n"
    saved = json.loads((tmp_path / "output.cursor").read_bytes())
    assert saved == {"pod": "p", "at": 9, "seen": 1, "size": 10, "complete": False}


def test_output_written_after_the_last_recorded_cursor_is_cut_and_copied_once(tmp_path):
    (tmp_path / OUTPUT).write_bytes(b"a\nb\n")  # b was written, then the service died
    cursor = Cursor(pod="p", at=5, seen=1, size=2)
    assert copy(tmp_path, cursor, [(5, b"a\n"), (6, b"b\n"), (8, b"c\n")]) == b"a\nb\nc\n"


def test_the_results_line_goes_apart_only_when_it_is_last(tmp_path):
    cursor = Cursor(pod="p")
    marker = b'runplane-results: {"results": {"x": 1}}\n'
    assert copy(tmp_path, cursor, [(1, b"a\n"), (2, marker)]) == b"a\n"  # held: more may come
    assert copy(tmp_path, cursor, [(2, marker), (3, b"b\n")]) == b"a\n" + marker + b"b\n"
    assert not (tmp_path / RESULTS).exists()
    assert copy(tmp_path, cursor, [(4, marker)], final=True) == b"a\n" + marker + b"b\n"
    assert json.loads((tmp_path / RESULTS).read_bytes()) == {"results": {"x": 1}}


def test_a_spool_on_a_fresh_machine_makes_its_home_private(tmp_path):
    from runplane.runtimes.output import private_dir

    run = private_dir(tmp_path / "home" / "runs" / "0123")
    for directory in (run, run.parent, run.parent.parent):
        assert directory.is_dir()
        assert directory.stat().st_mode & 0o777 == 0o700

"""A run's output: capped with marker lines, compressed once it ended, read by offset either
way; and the retention policy's terms, refused with their field when wrong."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from runplane.config import load_settings
from runplane.errors import ConfigError, InvalidValueError
from runplane.runtimes.contract import LOG_CHUNK
from runplane.runtimes.output import (
    COMPRESSED,
    HELD,
    INDEX,
    OUTPUT,
    append_output,
    finish_output,
    read_output,
    remove_run_dir,
)
from runplane.spec.retention import RetentionPolicy, check_overrides

CAP = 64 << 10


def read_all(directory: Path, step_from: int = 0) -> bytes:
    """Everything ``read_output`` gives, chunk after chunk, as ``runplane logs`` reads."""
    data, offset = b"", step_from
    while True:
        chunk, offset = read_output(directory / OUTPUT, offset)
        if not chunk:
            return data
        data += chunk


def lines(first: int, last: int) -> list[bytes]:
    return [f"line {i:06d}\n".encode() for i in range(first, last)]


def test_output_under_the_cap_is_kept_whole_and_compressed(tmp_path):
    written = b"".join(lines(0, 100))
    for line in lines(0, 100):
        append_output(tmp_path, line, CAP)
    assert read_all(tmp_path) == written  # live: the plain file
    finish_output(tmp_path, CAP)
    assert sorted(os.listdir(tmp_path)) == [COMPRESSED, INDEX]
    assert gzip.decompress((tmp_path / COMPRESSED).read_bytes()) == written  # zcat reads it
    assert read_all(tmp_path) == written
    assert read_output(tmp_path / OUTPUT, len(written) + 10) == (b"", len(written) + 10)
    finish_output(tmp_path, CAP)  # again: nothing changes
    assert read_all(tmp_path) == written


def test_output_over_the_cap_keeps_its_start_and_its_end_with_markers(tmp_path):
    every = lines(0, 40_000)  # 12 bytes a line: 480,000 bytes, over seven times the cap
    for line in every:
        append_output(tmp_path, line, CAP)
    live = read_all(tmp_path)
    assert live == b"".join(every)[: CAP // 4]  # the start, as it came
    assert (tmp_path / HELD).stat().st_size <= 2 * (CAP - CAP // 4)  # bounded while live
    finish_output(tmp_path, CAP)
    output = read_all(tmp_path)
    assert output.startswith(live)  # what a follower read stays at its offsets
    start, rest = output.split(b"\n[runplane] ", 1)
    marker, end = rest.split(b"\n", 1)
    assert start == live
    kept = int(marker.split(b"the last ")[1].split(b" ")[0])
    dropped = int(marker.split(b" ")[0])
    assert kept == len(end) <= CAP - CAP // 4
    assert end == b"".join(every)[-kept:]
    assert end.startswith(b"line ")  # the kept end starts at a line
    assert CAP // 4 + dropped + kept == len(b"".join(every))
    assert len(output) < CAP + 200  # the cap, and the marker line


def test_output_within_the_cap_is_kept_exactly_as_written(tmp_path):
    written = "é".encode() * (CAP // 2 - 1) + b"!"  # past the live start, split inside a char
    for start in range(0, len(written), 1000):
        append_output(tmp_path, written[start : start + 1000], CAP)
    finish_output(tmp_path, CAP)
    assert read_all(tmp_path) == written


def test_compressed_output_reads_by_offset_as_the_plain_file_did(tmp_path):
    blob = os.urandom(3 * LOG_CHUNK // 2).hex().encode()  # three members and a bit
    append_output(tmp_path, blob, 1 << 40)
    plain = {offset: read_output(tmp_path / OUTPUT, offset) for offset in _offsets(len(blob))}
    finish_output(tmp_path, 1 << 40)
    assert not (tmp_path / OUTPUT).exists()
    for offset, expected in plain.items():
        assert read_output(tmp_path / OUTPUT, offset) == expected, offset
    (tmp_path / INDEX).unlink()  # a compressed output without its index reads the same
    for offset, expected in plain.items():
        assert read_output(tmp_path / OUTPUT, offset) == expected, offset


def _offsets(size: int) -> list[int]:
    return [0, 1, LOG_CHUNK - 1, LOG_CHUNK, 2 * LOG_CHUNK + 7, size - 3, size, size + 5]


def test_a_planted_link_is_never_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"not yours")
    run = tmp_path / "run"
    run.mkdir()
    (run / COMPRESSED).symlink_to(secret)
    assert read_output(run / OUTPUT, 0) == (b"", 0)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "abc123").symlink_to(run)
    assert remove_run_dir(tmp_path / "runs", "abc123")
    assert secret.exists()
    assert (run / COMPRESSED).is_symlink()
    with pytest.raises(ValueError, match="not a run uid"):
        remove_run_dir(tmp_path / "runs", "../run")


@pytest.mark.parametrize(
    ("terms", "field", "allowed"),
    [
        ({"runs_max_age": "soon"}, "retention.runs_max_age", "a duration is value+unit"),
        ({"logs_max_age": "10s"}, "retention.logs_max_age", "at least 60 seconds"),
        ({"runs_max_count": 0}, "retention.runs_max_count", "a whole number of runs from 1"),
        ({"runs_max_count": True}, "retention.runs_max_count", "a whole number of runs from 1"),
        ({"keep": 3}, "retention.keep", "a retention policy has runs_max_age"),
    ],
)
def test_bad_policy_terms_are_refused_by_field(terms, field, allowed):
    with pytest.raises(InvalidValueError) as refused:
        check_overrides("retention", terms)
    assert refused.value.field == field
    assert allowed in refused.value.allowed
    assert refused.value.example


def test_a_policy_reads_its_terms_and_a_project_overrides_them():
    policy = RetentionPolicy(runs_max_age="2 weeks", logs_max_age="1d")
    assert policy.seconds("runs_max_age") == 14 * 86400
    project = policy.over(check_overrides("retention", {"logs_max_age": -1, "runs_max_count": 5}))
    assert (project.runs_max_age, project.runs_max_count, project.logs_max_age) == (
        "2 weeks",
        5,
        None,
    )
    assert project.seconds("logs_max_age") is None  # -1: kept for ever


def test_the_service_default_is_checked_with_its_setting_named(monkeypatch):
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    monkeypatch.setenv("RUNPLANE_RETENTION__RUNS_MAX_AGE", "a while")
    with pytest.raises(ConfigError, match=r"retention\.runs_max_age: 'a while' is not valid"):
        load_settings()
    monkeypatch.delenv("RUNPLANE_RETENTION__RUNS_MAX_AGE")
    monkeypatch.setenv("RUNPLANE_RETENTION__MAX_OUTPUT_BYTES", "100")
    with pytest.raises(ConfigError, match=r"retention\.max_output_bytes"):
        load_settings()


def test_a_next_attempt_reopens_the_closed_output_and_keeps_its_offsets(tmp_path):
    for line in lines(0, 20_000):  # the first attempt: past the cap
        append_output(tmp_path, line, CAP)
    finish_output(tmp_path, CAP)
    first = read_all(tmp_path)
    append_output(tmp_path, b"attempt 2\n", CAP)  # reopened: plain again, the same bytes
    assert sorted(os.listdir(tmp_path)) == sorted([OUTPUT, "output.base"])
    assert read_all(tmp_path) == first + b"attempt 2\n"  # its start is followed live
    assert read_all(tmp_path, len(first)) == b"attempt 2\n"
    for line in lines(0, 20_000):
        append_output(tmp_path, line, CAP)
    finish_output(tmp_path, CAP)
    assert sorted(os.listdir(tmp_path)) == [COMPRESSED, INDEX]
    output = read_all(tmp_path)
    assert output.startswith(first + b"attempt 2\nline 000000\n")
    assert output.count(b"[runplane] ") == 2
    assert output.endswith(b"line 019999\n")
    assert len(output) - len(first) < CAP + 200  # the cap holds per attempt


def test_an_attempt_after_a_short_one_gets_a_whole_start_of_its_own(tmp_path):
    append_output(tmp_path, b"attempt 1 failed\n", CAP)  # far under the cap's start
    finish_output(tmp_path, CAP)
    first = read_all(tmp_path)
    second = lines(0, 1365)  # 16,380 bytes: within the cap's start (16 KiB) by itself
    for line in second:
        append_output(tmp_path, line, CAP)
    assert not (tmp_path / HELD).exists()  # all of it in the start, followed live
    assert read_all(tmp_path) == first + b"".join(second)


def test_an_output_runplane_did_not_close_is_never_inflated(tmp_path):
    """A run that may write in its directory plants a compressed output (and a huge base)
    of another user's: the next attempt starts afresh instead of inflating it, and the cap
    holds."""
    planted = gzip.compress(b"x" * (4 * CAP))
    (tmp_path / COMPRESSED).write_bytes(planted)
    (tmp_path / INDEX).write_text(f'{{"size": {4 * CAP}, "starts": [0, {len(planted)}]}}')
    (tmp_path / "output.base").write_text(str(1 << 40))
    for name in (COMPRESSED, INDEX, "output.base"):
        os.chown(tmp_path / name, 12345, 12345)
    for line in lines(0, 20_000):  # 240,000 bytes, nearly four caps
        append_output(tmp_path, line, CAP)
    finish_output(tmp_path, CAP)
    output = read_all(tmp_path)
    assert b"x" not in output
    assert output.startswith(b"line 000000\n")
    assert len(output) < CAP + 200


def test_an_attempt_left_open_by_a_dead_service_is_closed_before_the_next_one(tmp_path):
    """The service died under a local run's first attempt (its output plain, its end held);
    the retry closes that output first, so the first attempt's end is kept even when the
    retry prints nothing."""
    from runplane.runtimes.local.outpipe import OutputPipe

    for line in lines(0, 20_000):
        append_output(tmp_path, line, CAP)
    assert (tmp_path / HELD).exists()
    OutputPipe(tmp_path, CAP).close()  # the retry, printing nothing
    assert sorted(os.listdir(tmp_path)) == [COMPRESSED, INDEX]
    assert read_all(tmp_path).endswith(b"line 019999\n")

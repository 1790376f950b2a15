"""How a run's output is copied from the pod log: the kubelet's times read exactly, a resumed
read skips what was copied, the results line kept apart, the output capped and closed as a
local run's is. (The copy of a live pod's log, its resume after a break and after a killed
service, are shown on the real node; here the pod log is served by a small HTTP server.)"""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from kubernetes import client

from runplane.runtimes.kubernetes import logspool
from runplane.runtimes.kubernetes.api.backoff import Backoff
from runplane.runtimes.kubernetes.api.rest import RestApi
from runplane.runtimes.kubernetes.logspool import (
    RESULTS,
    Cursor,
    LogSpool,
    PodLog,
    _Appender,
    stamp_ns,
)
from runplane.runtimes.output import (
    COMPRESSED,
    DROPPED,
    HELD,
    INDEX,
    MARKER,
    OUTPUT,
    finish_output,
    read_output,
)

SECOND = 1_000_000_000
CAP = 64 << 10  # the smallest cap the setting allows: a start of 16 KiB, an end of 48 KiB


def test_times_are_read_to_the_nanosecond_whatever_their_precision():
    base = stamp_ns("2026-11-23T14:10:35Z")
    assert stamp_ns("2026-11-23T14:10:35.613895137Z") == base + 613_895_137
    assert stamp_ns("2026-11-23T14:10:35.5Z") == base + SECOND // 2  # shorter: not a float
    assert stamp_ns("2026-11-23T16:10:35.000000001+02:00") == base + 1
    with pytest.raises(ValueError, match="not an RFC 3339 time"):
        stamp_ns("yesterday")


def copy(tmp_path, cursor, lines, final=False, cap=CAP):
    with _Appender(tmp_path, cursor, cap) as out:
        for at, text in lines:
            if out.fresh(at):
                out.write(at, text)
        out.finish(final)
    return (tmp_path / OUTPUT).read_bytes()


def resume(tmp_path, cursor, log, upto, final=False):
    """A read as the API server answers it: the log's first ``upto`` lines, those stamped from
    the cursor's second on (``sinceTime``)."""
    return copy(tmp_path, cursor, [line for line in log[:upto] if line[0] >= cursor.at], final)


def read_all(directory: Path, offset: int = 0) -> bytes:
    """Everything the run's output reads as from ``offset``, chunk after chunk."""
    data = b""
    while True:
        chunk, offset = read_output(directory / OUTPUT, offset)
        if not chunk:
            return data
        data += chunk


def numbered(first: int, last: int, at: int = 0) -> list[tuple[int, bytes]]:
    """Lines of 12 bytes, each stamped a second after the one before."""
    return [((at + i) * SECOND, f"line {i:06d}\n".encode()) for i in range(first, last)]


def test_a_resumed_read_skips_the_lines_it_copied_and_no_others(tmp_path):
    cursor = Cursor(pod="p")
    log = [(5 * SECOND, b"a\n"), (7 * SECOND, b"b\n"), (7 * SECOND, b"c\n")]
    assert resume(tmp_path, cursor, log, 3) == b"a\nb\nc\n"
    # From the second before the last line's: two lines copied from then on.
    assert (cursor.at, cursor.seen, cursor.size) == (6 * SECOND, 2, 6)
    # A resume reads from that second again: what it has seen is skipped, the third line
    # with the same time is not.
    log += [(7 * SECOND, b"d\n"), (9 * SECOND, b"e\n")]
    assert resume(tmp_path, cursor, log, 5) == b"a\nb\nc\nd\ne\n"
    saved = json.loads((tmp_path / "output.cursor").read_bytes())
    at = 8 * SECOND
    assert saved == {"pod": "p", "at": at, "seen": 1, "size": 10, "complete": False, "attempt": 0}


def test_a_resume_copies_each_line_once_when_the_two_streams_times_cross(tmp_path):
    """stdout and stderr are stamped apart: the log can hold a line stamped a little before
    the one above it. A resume after it copies neither again, nor loses the one after."""
    cursor = Cursor(pod="p")
    log = [
        (5 * SECOND + 500, b"line 299\n"),  # stdout
        (5 * SECOND + 400, b"to stderr too\n"),  # stderr, stamped first, written after
        (5 * SECOND + 450, b"line 300\n"),  # stdout again, stamped between the two
        (9 * SECOND, b"after the pause\n"),
    ]
    assert resume(tmp_path, cursor, log, 2) == b"line 299\nto stderr too\n"
    assert resume(tmp_path, cursor, log, 4) == b"".join(text for _, text in log)
    assert resume(tmp_path, cursor, log, 4) == b"".join(text for _, text in log)


def test_output_written_after_the_last_recorded_cursor_is_cut_and_copied_once(tmp_path):
    (tmp_path / OUTPUT).write_bytes(b"a\nb\n")  # b was written, then the service died
    cursor = Cursor(pod="p", at=5, seen=1, size=2)
    assert copy(tmp_path, cursor, [(5, b"a\n"), (6, b"b\n"), (8, b"c\n")]) == b"a\nb\nc\n"


def test_the_results_line_goes_apart_only_when_it_is_last(tmp_path):
    cursor = Cursor(pod="p")
    marker = b'runplane-results: {"results": {"x": 1}}\n'
    log = [(1, b"a\n"), (2, marker), (3, b"b\n"), (4, marker)]
    assert resume(tmp_path, cursor, log, 2) == b"a\n"  # held: more may come
    assert resume(tmp_path, cursor, log, 3) == b"a\n" + marker + b"b\n"
    assert not (tmp_path / RESULTS).exists()
    assert resume(tmp_path, cursor, log, 4, final=True) == b"a\n" + marker + b"b\n"
    assert json.loads((tmp_path / RESULTS).read_bytes()) == {"results": {"x": 1}}


def test_a_spool_on_a_fresh_machine_makes_its_home_private(tmp_path):
    from runplane.runtimes.output import private_dir

    run = private_dir(tmp_path / "home" / "runs" / "0123")
    for directory in (run, run.parent, run.parent.parent):
        assert directory.is_dir()
        assert directory.stat().st_mode & 0o777 == 0o700


def test_output_past_the_cap_keeps_its_start_and_its_end_after_a_marker(tmp_path):
    lines = numbered(0, 20_000)  # 240,000 bytes: almost four caps
    written = b"".join(text for _, text in lines)
    cursor = Cursor(pod="p")
    for part in range(1_000, 20_001, 1_000):  # a read at a time, as a follow brings them
        resume(tmp_path, cursor, lines, part)
    assert cursor.size == len(written)  # the cursor counts what was appended, not what is kept
    assert (tmp_path / OUTPUT).stat().st_size == CAP // 4  # the start; the end is held
    finish_output(tmp_path, CAP)
    output = read_all(tmp_path)
    start, _, rest = output.partition(b"\n" + MARKER)
    assert start == written[: CAP // 4]
    count, kept = rest.split(b"\n", 1)
    dropped = int(count.split(b" ", 1)[0])
    assert written.endswith(kept)
    assert kept.startswith(b"line ")
    assert dropped == len(written) - len(start) - len(kept)
    assert count.endswith(f"the last {len(kept)} bytes follow".encode())
    assert len(kept) <= CAP - CAP // 4


@pytest.mark.parametrize("lost", [3_000, 17_000], ids=["held", "held-cut-back"])
def test_a_resume_with_a_held_end_cuts_what_came_after_the_cursor(tmp_path, lost):
    """A service died after it recorded the cursor at line 3,000 (the start full, the rest
    held) and appended ``lost`` lines more; past 8,000 of them the held end was cut back
    beyond the cursor. The next service copies from the cursor: the output closes exactly as
    an unbroken copy's."""
    lines = numbered(0, 25_000)
    unbroken = tmp_path / "unbroken"
    unbroken.mkdir()
    copy(unbroken, Cursor(pod="p"), lines)
    finish_output(unbroken, CAP)

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    cursor = Cursor(pod="p")
    resume(resumed, cursor, lines, 3_000)
    recorded = Cursor(**json.loads((resumed / "output.cursor").read_bytes()))
    resume(resumed, cursor, lines, 3_000 + lost)  # appended; its cursor never saved
    assert (os.path.exists(resumed / DROPPED)) == (lost > 8_000)
    copy(resumed, recorded, lines)  # the next service reads the pod log from the cursor on
    assert recorded.size == 25_000 * 12
    finish_output(resumed, CAP)
    assert read_all(resumed) == read_all(unbroken)


def test_a_results_line_past_the_cap_still_goes_apart(tmp_path):
    cursor = Cursor(pod="p")
    marker = b'runplane-results: {"results": {"x": 1}}\n'
    copy(tmp_path, cursor, [*numbered(0, 10_000), (20_000 * SECOND, marker)], final=True)
    assert json.loads((tmp_path / RESULTS).read_bytes()) == {"results": {"x": 1}}
    assert cursor.size == 10_000 * 12
    finish_output(tmp_path, CAP)
    assert read_all(tmp_path).endswith(b"line 009999\n")


EPOCH = 1_795_000_000  # the pod log's lines are stamped from this second on


class PodLogs(BaseHTTPRequestHandler):
    """The API server's pod log endpoint, as much of it as the spool asks: the lines of a pod
    stamped with their times, from ``sinceTime`` on, the stream closed at their end."""

    pods: dict[str, list[tuple[int, bytes]]] = {}
    #: The pods whose log was asked for, in order.
    asked: list[str] = []
    #: Pods on a node whose kubelet cannot be reached: the API server answers 500, after
    #: ``refusal_delay`` seconds of trying to reach it.
    refused: set[str] = set()
    refusal_delay = 0.0

    def do_GET(self) -> None:
        url = urlparse(self.path)
        self.asked.append(url.path.split("/")[-2])
        pod = url.path.split("/")[-2]
        if pod in self.refused:
            time.sleep(self.refusal_delay)
            self.send_error(500, "error dialing backend: the node's kubelet is unreachable")
            return
        if pod not in self.pods:
            self.send_error(404)
            return
        since = parse_qs(url.query).get("sinceTime", [""])[0]
        first = stamp_ns(since) if since else 0
        body = b"".join(
            stamp(EPOCH * SECOND + at).encode() + b" " + text
            for at, text in self.pods[pod]
            if EPOCH * SECOND + at >= first
        )
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def stamp(at: int) -> str:
    whole = datetime.fromtimestamp(at // SECOND, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{at % SECOND:09d}Z"


@pytest.fixture
def spool(tmp_path) -> Iterator[LogSpool]:
    PodLogs.pods = {}
    PodLogs.asked = []
    PodLogs.refused = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), PodLogs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")
    logs = LogSpool(RestApi(client.ApiClient(configuration)), "ns", tmp_path / "runs", cap=CAP)
    yield logs
    logs.close()
    server.shutdown()
    server.server_close()
    PodLogs.refused = set()  # the other tests' pods are served
    PodLogs.refusal_delay = 0.0


UID = "0123abcd"


def test_an_ended_pods_output_is_copied_capped_and_compressed(spool, tmp_path):
    lines = numbered(0, 20_000)
    PodLogs.pods["run-1"] = lines
    spool.finish(UID, "run-1")
    directory = tmp_path / "runs" / UID
    assert sorted(os.listdir(directory)) == sorted([COMPRESSED, INDEX, "output.cursor"])
    output = read_all(directory)
    assert gzip.decompress((directory / COMPRESSED).read_bytes()) == output
    assert output.count(MARKER) == 1
    assert output.endswith(b"line 019999\n")
    assert len(output) < CAP + 200
    assert json.loads((directory / "output.cursor").read_bytes())["complete"]
    spool.finish(UID, "run-1")  # seen ended again (its delete): nothing changes
    assert read_all(directory) == output


def test_a_retried_runs_next_pod_appends_after_the_closed_output(spool, tmp_path):
    directory = tmp_path / "runs" / UID
    PodLogs.pods["run-1"] = numbered(0, 8_000)
    spool.finish(UID, "run-1")
    first = read_all(directory)
    assert MARKER in first
    assert os.path.exists(directory / COMPRESSED)

    # The next attempt's output reopens the closed one: the same bytes at the same offsets,
    # and its start is followed live as the first attempt's was.
    second = [(at, b"again " + text) for at, text in numbered(0, 10_000, at=9_000)]
    cursor = Cursor(pod="run-2", size=len(first))
    copy(directory, cursor, second[:10])
    assert not os.path.exists(directory / COMPRESSED)
    assert read_all(directory) == first + b"".join(text for _, text in second[:10])
    assert read_all(directory, len(first)).startswith(b"again line 000000\n")

    (directory / "output.cursor").write_text(json.dumps(cursor.__dict__))
    PodLogs.pods["run-2"] = second
    spool.finish(UID, "run-2")
    output = read_all(directory)
    assert output.startswith(first)  # the file only grew
    assert output.count(MARKER) == 2  # each attempt's end after its own marker
    assert output.endswith(b"again line 009999\n")
    assert output[len(first) :].startswith(b"again line 000000\n")  # its own start, and end
    assert len(output) - len(first) < CAP + 200
    assert sorted(os.listdir(directory)) == sorted([COMPRESSED, INDEX, "output.cursor"])
    assert not os.path.exists(directory / HELD)


def test_a_copy_finished_before_a_restart_closed_its_output_is_closed_when_seen_ended(
    spool, tmp_path
):
    directory = tmp_path / "runs" / UID
    directory.mkdir(parents=True)
    cursor = Cursor(pod="run-1")
    copy(directory, cursor, numbered(0, 5_000))
    cursor.complete = True  # the last service stopped between these two
    (directory / "output.cursor").write_text(json.dumps(cursor.__dict__))
    PodLogs.asked.clear()
    spool.finish(UID, "run-1")
    assert PodLogs.asked == []  # no request: all of it was copied
    assert sorted(os.listdir(directory)) == sorted([COMPRESSED, INDEX, "output.cursor"])
    assert read_all(directory).endswith(b"line 004999\n")


def test_a_pod_gone_before_its_last_read_has_its_output_closed_all_the_same(spool, tmp_path):
    directory = tmp_path / "runs" / UID
    directory.mkdir(parents=True)
    cursor = Cursor(pod="run-1")
    copy(directory, cursor, numbered(0, 10_000))  # copied by the last service, then the pod went
    spool.finish(UID, "run-1")  # the pod log answers 404
    output = read_all(directory)
    assert output.count(MARKER) == 1
    assert output.endswith(b"line 009999\n")
    assert os.path.exists(directory / COMPRESSED)


def test_an_earlier_attempts_pod_seen_late_leaves_the_later_attempts_output_alone(spool, tmp_path):
    """After a restart the pods are listed again in any order: the first attempt's ended pod
    seen after the second attempt's copy began neither copies its log again nor closes the
    output the second attempt is still writing."""
    directory = tmp_path / "runs" / UID
    directory.mkdir(parents=True)
    cursor = Cursor(pod="run-2", attempt=2)
    copy(directory, cursor, numbered(0, 100))
    (directory / "output.cursor").write_text(json.dumps(cursor.__dict__))
    before = (directory / OUTPUT).read_bytes()
    PodLogs.pods["run-1"] = numbered(0, 10)
    PodLogs.asked.clear()
    spool.finish(UID, "run-1", attempt=1)
    assert PodLogs.asked == []
    assert (directory / OUTPUT).read_bytes() == before  # still open, nothing added
    assert not os.path.exists(directory / COMPRESSED)


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.01)


@pytest.fixture
def resting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node that refused a log rests a tenth of a second, not seconds."""
    monkeypatch.setattr(logspool, "_NODE_BACKOFF", Backoff(initial=0.1, maximum=0.1))


def test_a_node_that_serves_no_logs_is_asked_by_one_of_its_pods_until_it_serves(
    spool, tmp_path, resting
):
    """Its other pods wait parked on it, asking nothing, however often it is asked; once it
    serves a log, every one of them is copied."""
    pods = [f"run-{index}" for index in range(5)]
    for index, pod in enumerate(pods):
        PodLogs.pods[pod] = numbered(0, 3)
        PodLogs.refused.add(pod)
        spool.follow(f"uid{index}", pod, node="node-a")
    eventually(lambda: len(PodLogs.asked) >= 3)  # asked, refused, rested: three times over
    asking = PodLogs.asked[0]
    assert set(PodLogs.asked) == {asking}
    assert not spool.serves("node-a")
    assert not spool.serves_any()  # no run's usage is asked of any node

    PodLogs.refused.clear()  # its kubelet is reachable again
    for index in range(len(pods)):
        output = tmp_path / "runs" / f"uid{index}" / OUTPUT
        eventually(lambda output=output: output.exists() and output.read_bytes().count(b"\n") == 3)
    assert spool.serves("node-a")
    assert spool.serves_any()
    assert set(PodLogs.asked) == set(pods)


def test_the_pod_asking_a_node_that_ends_or_is_replaced_hands_the_asking_on(
    spool, tmp_path, resting
):
    """The pod that asks a refusing node for the others ends (its last read is its own), or
    is replaced by its run's next attempt: the next pod parked on the node asks it."""
    pods = ["run-0", "run-1", "run-2"]
    for index, pod in enumerate(pods):
        PodLogs.pods[pod] = numbered(0, 3)
        PodLogs.refused.add(pod)
        spool.follow(f"uid{index}", pod, node="node-a")
    eventually(lambda: len(PodLogs.asked) >= 1)
    first = PodLogs.asked[0]
    spool.finish(f"uid{pods.index(first)}", first, node="node-a")
    eventually(lambda: len(set(PodLogs.asked)) >= 2)
    second = next(pod for pod in PodLogs.asked if pod != first)

    # The second's run is retried: its pod's copy stops, and the third pod asks.
    index = pods.index(second)
    PodLogs.refused.add(f"{second}-again")
    spool.follow(f"uid{index}", f"{second}-again", node="node-a", attempt=2)
    (third,) = set(pods) - {first, second}
    eventually(lambda: third in PodLogs.asked)


def test_a_time_coming_wakes_one_idle_copier_not_all(spool, resting):
    """Eight nodes that serve no logs, each asked again after a rest by its own pod, with
    the copiers idle in between: each time one is due, one copier wakes for it. (Each refusal
    takes a twentieth of a second, so the eight first asks need eight copiers.)"""
    PodLogs.refusal_delay = 0.05
    waits: list[str] = []
    for condition in {spool._lock, spool._head}:
        original = condition.wait

        def counted(timeout: float | None = None, original=original) -> bool:
            waits.append(threading.current_thread().name)
            return bool(original(timeout))

        condition.wait = counted
    for index in range(8):
        PodLogs.refused.add(f"run-{index}")
        spool.follow(f"uid{index}", f"run-{index}", node=f"node-{index}")
    eventually(lambda: len(PodLogs.asked) >= 40)  # each node asked five times, or so
    asks, woken = len(PodLogs.asked), len(waits)
    assert len(set(waits)) >= 8  # eight copiers at least, each idle in turn
    assert woken <= 3 * asks, (woken, asks)  # every idle copier woken each time: over 4


def test_a_replica_that_does_not_lead_catches_up_to_the_bytes_the_leaders_copy_holds(tmp_path):
    """A replica that watches no pods copies a run's output when asked for it, one read of
    each pod's log from its own cursor on: a running pod's lines so far (a cut last line
    waits for the next read), then, the pod ended, the rest, its results line apart and the
    output closed; the leader's spool, told of the same pod, holds the same bytes."""
    PodLogs.pods = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), PodLogs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    configuration = client.Configuration(host=f"http://127.0.0.1:{server.server_port}")

    def spool_in(home: str) -> LogSpool:
        return LogSpool(RestApi(client.ApiClient(configuration)), "ns", tmp_path / home, cap=CAP)

    follower, leader = spool_in("follower"), spool_in("leader")
    try:
        lines = numbered(0, 9_000)
        cut = [*lines[:100], (100 * SECOND, b"half a li")]
        PodLogs.pods["run-1"] = cut
        follower.catch_up(UID, [PodLog("run-1")])
        assert read_all(tmp_path / "follower" / UID) == b"".join(t for _, t in lines[:100])

        marker = b'runplane-results: {"results": {"x": 1}}\n'
        PodLogs.pods["run-1"] = [*lines, (9_000 * SECOND, marker)]
        PodLogs.asked.clear()
        follower.catch_up_every = 3600.0
        follower.catch_up(UID, [PodLog("run-1", ended=True)])
        assert PodLogs.asked == []  # caught up lately: the copy made then is answered
        follower.catch_up_every = 0.0
        follower.catch_up(UID, [PodLog("run-1", ended=True)])
        leader.finish(UID, "run-1")
        copied = read_all(tmp_path / "follower" / UID)
        assert copied == read_all(tmp_path / "leader" / UID)
        assert copied.count(MARKER) == 1
        assert copied.endswith(b"line 008999\n")
        assert json.loads((tmp_path / "follower" / UID / RESULTS).read_bytes()) == {
            "results": {"x": 1}
        }
        assert os.path.exists(tmp_path / "follower" / UID / COMPRESSED)

        # The next attempt's pod appends after, as it does in the leader's copy; an earlier
        # attempt's ended pod, listed again, changes nothing, and a pod gone keeps the copy.
        PodLogs.pods["run-2"] = [(at, b"again " + text) for at, text in numbered(0, 50, 9_500)]
        pods = [PodLog("run-2", attempt=2), PodLog("run-1", ended=True)]
        follower.catch_up(UID, pods)
        assert read_all(tmp_path / "follower" / UID) == copied + b"".join(
            text for _, text in PodLogs.pods["run-2"]
        )
        del PodLogs.pods["run-2"]
        follower.catch_up(UID, pods)
        assert read_all(tmp_path / "follower" / UID).endswith(b"again line 000049\n")
    finally:
        follower.close()
        leader.close()
        server.shutdown()
        server.server_close()

"""Live streams' parts: the slots that bound them, the one reader per run, and their framing."""

from __future__ import annotations

import asyncio
import re

import pytest

from runplane.service.feed import RunFeed
from runplane.service.streams import (
    KEPT_BYTES,
    LogFollower,
    LogFollowers,
    StreamSlots,
    StreamsRefused,
)
from runplane.ui.live import sse


def test_slots_bound_each_user_and_the_total_and_come_back() -> None:
    slots = StreamSlots(per_user=2, total=3, retry_after=9)
    first, _ = slots.take("ann"), slots.take("ann")
    with pytest.raises(StreamsRefused) as mine:
        slots.take("ann")
    assert "service.live_streams.per_user = 2" in mine.value.reason
    assert mine.value.retry_after == 9
    slots.take("ben")
    with pytest.raises(StreamsRefused) as everyone:
        slots.take("cal")
    assert "service.live_streams.total = 3" in everyone.value.reason
    first.release()
    first.release()  # given back once, however often it is released
    assert slots.open == 2
    slots.take("cal")
    with pytest.raises(StreamsRefused):
        slots.take("ann")


@pytest.mark.parametrize("text", ["a\rb", "a\nb", "a\r\nb", "a\r\revent: end\r\ndata: x\n\nb"])
def test_no_text_starts_a_field_or_an_event(text: str) -> None:
    framed = sse("summary", text, "7")
    assert framed.endswith("\n\n")
    lines = re.split(r"\r\n|\r|\n", framed[:-2])
    assert lines[:2] == ["event: summary", "id: 7"]
    assert all(line.startswith("data: ") for line in lines[2:])
    data = "\n".join(line.removeprefix("data: ") for line in lines[2:])
    assert data == re.sub(r"\r\n|\r", "\n", text)


def test_an_event_name_or_id_of_two_lines_is_refused() -> None:
    with pytest.raises(ValueError, match="one line"):
        sse("log\rend")
    with pytest.raises(ValueError, match="one line"):
        sse("log", "", "1\n2")


def test_many_streams_of_one_run_cost_one_reader() -> None:
    output = b"".join(f"line {n}\n".encode() for n in range(100))
    reads: list[int] = []

    def read(uid: str, offset: int) -> tuple[bytes, int]:
        reads.append(offset)
        chunk = output[offset : offset + 300]
        return chunk, offset + len(chunk)

    async def follow_all() -> list[bytes]:
        followers = LogFollowers(StreamSlots(100, 100, 1), RunFeed(), read, lambda uid: True)

        async def one() -> bytes:
            got = bytearray()
            async with followers.follow("run", 0) as follower:
                while True:
                    chunk = follower.since(len(got))
                    assert chunk is not None
                    got += chunk
                    if not chunk and follower.done:
                        return bytes(got)
                    if not chunk:
                        async with follower.changed:
                            await follower.changed.wait()

        return await asyncio.gather(*(one() for _ in range(50)))

    assert asyncio.run(follow_all()) == [output] * 50
    assert len(reads) == len(output) // 300 + 2  # each chunk once, then the empty end


def test_a_follower_keeps_recent_output_and_sends_further_streams_to_read_on_their_own() -> None:
    follower = LogFollower(start=100)
    follower.add(b"x" * KEPT_BYTES, 100 + KEPT_BYTES)
    follower.add(b"yz", 102 + KEPT_BYTES)
    assert follower.since(100) is None  # dropped: that stream reads on its own
    assert follower.since(102 + KEPT_BYTES - 3) == b"xyz"
    assert follower.since(follower.end) == b""
    # Output the runtime skipped (a capped log's middle): nothing is kept before the next read.
    follower.add(b"[cut]", follower.end + 5000)
    assert follower.kept == b""
    assert follower.since(follower.end - 1) is None

"""A run's usage series stays bounded and keeps its peak; the pictures say their figures in
words and draw one point or bar per figure."""

from __future__ import annotations

import re
from collections.abc import Iterable

from runplane.runs import RunRecord, RunState, Usage
from runplane.service.usage_samples import Sample, Series, UsageSampler, decode, encode
from runplane.ui.charts import is_spot, node_bars, peaks_chart, usage_charts

MI = 1024 * 1024


def test_a_long_run_keeps_at_most_the_limit_and_its_peak() -> None:
    series = Series(limit=10)
    for i in range(1000):
        series.add(Sample(float(i), 500 * MI if i == 637 else i, i * 0.5))
    assert 5 <= len(series.points) <= 10
    assert max(p.memory_bytes for p in series.points) == 500 * MI
    assert series.points[-1].at >= 1000 - series.stride  # it spans the whole run
    assert series.stride > 1


def test_a_short_run_keeps_every_point() -> None:
    series = Series(limit=10)
    for i in range(7):
        assert series.add(Sample(float(i), i, 0.0))
    assert [p.at for p in series.points] == [float(i) for i in range(7)]


def test_stored_series_read_back_and_bad_rows_read_as_none() -> None:
    points = [Sample(1.0, 2, 3.0), Sample(2.5, 7, 4.25)]
    assert decode(encode(points)) == points
    assert decode({"not": "a list"}) == []
    assert decode([[1, 2]]) == []


class _Store:
    def __init__(self) -> None:
        self.saved: list[dict[str, list[Sample]]] = []

    def save(self, series: dict[str, list[Sample]]) -> None:
        self.saved.append(series)


def test_the_sampler_samples_what_the_runtime_can_tell_and_forgets_ended_runs() -> None:
    running = ["a", "b"]
    usage = {"a": Usage(40 * MI, 1.0, 30 * MI)}  # b's runtime cannot tell
    store = _Store()
    asked: list[list[str]] = []

    def usages(uids: Iterable[str]) -> dict[str, Usage]:
        asked.append(sorted(uids))
        return {uid: usage[uid] for uid in uids if uid in usage}

    sampler = UsageSampler(store, lambda: list(running), usages)  # type: ignore[arg-type]
    assert sampler.look() == set()
    assert asked == [["a", "b"]]  # every running run in one call
    sampler.flush()
    assert list(store.saved[-1]) == ["a"]  # b's runtime cannot tell: nothing for it
    assert store.saved[-1]["a"][0].memory_bytes == 30 * MI  # the memory held now
    running.remove("a")
    ended = sampler.look()
    assert ended == {"a"}
    sampler.flush(ended)
    assert sampler.points("a") is None


def _points(svg: str) -> int:
    found = re.search(r'<polyline[^>]* points="([^"]*)"', svg)
    return len(found.group(1).split()) if found else 0


def test_the_usage_pictures_draw_each_sample_against_request_and_limit() -> None:
    samples = [Sample(100.0 + i, (10 + 10 * i) * MI, 0.5 * i) for i in range(5)]
    memory, cpu = usage_charts(samples, {"memory": "32Mi", "cpu": "250m"}, {"memory": "64Mi"})
    assert _points(memory.svg) == 5
    assert 'data-points="5"' in memory.svg
    assert _points(cpu.svg) == 4  # a rate between two samples
    assert "peak 50.0 MiB" in memory.words or "peak 50" in memory.words
    assert "request 32" in memory.words
    assert "limit 64" in memory.words
    assert "<title" in memory.svg
    assert memory.words in memory.svg.replace("&#39;", "'")
    assert "500m" in cpu.words
    assert "limit not set" in cpu.words
    empty, _ = usage_charts([], {}, {})
    assert "no sample yet" in empty.words
    assert "<polyline" not in empty.svg


def _run(uid: str, peak: int, limit: str) -> RunRecord:
    return RunRecord(
        uid=uid,
        project="p",
        name="f",
        runtime="local",
        state=RunState.COMPLETED,
        reason="",
        status_text="",
        params={},
        inputs={},
        thresholds={},
        priority_class="",
        requests={},
        limits={"memory": limit},
        results={},
        peak_memory_bytes=peak,
        cpu_seconds=1.0,
        created_at=0.0,
        updated_at=0.0,
        state_since=0.0,
        started_at=0.0,
        ended_at=1.0,
        function={},
    )


def test_recent_peaks_are_bars_against_each_run_limit() -> None:
    runs = [_run(f"u{i}", (i + 1) * 20 * MI, "64Mi") for i in range(4)]
    chart = peaks_chart(runs)
    assert chart is not None
    assert chart.svg.count('class="bar') == 4
    assert chart.svg.count("bar-over") == 1
    assert "last 4 measured runs" in chart.words


def test_node_bars_say_requested_of_allocatable() -> None:
    chart = node_bars("n1", {"cpu": 4000, "memory": 8 * 1024 * MI, "pods": 0}, {"cpu": 1000}, "x")
    assert chart.svg.count('class="capacity"') == 2
    assert "cpu 3 of 4 requested (75%)" in chart.words
    assert is_spot({"pool": "spot"}, {"pool": "spot"})
    assert not is_spot({"pool": "spot"}, {})

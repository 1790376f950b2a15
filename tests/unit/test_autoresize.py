"""Live right-sizing as a function states it and as it is rendered, decided and shown: the
checks with their errors, the pod's annotation and resize policy, when a resize is due, and
the resizes on a run's chart and in its suggestions."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import runplane
from runplane import names
from runplane.errors import ConflictError, InvalidValueError, MissingValueError
from runplane.rendering.autoresize import plan_of
from runplane.runs import ResizeRecord, RunRecord
from runplane.runtimes.local.cgroups import Counters, RunGroup
from runplane.runtimes.local.resize import Refused, resize
from runplane.runtimes.resizing import Sizes, Watch, wanted
from runplane.service.resizing import amounts
from runplane.service.sizing import suggest
from runplane.spec.autoresize import AutoResizePlan
from runplane.ui.charts import usage_charts
from tests.unit.test_sizing_costs import attempt, record

MI = 2**20


def _job() -> runplane.Function:
    return runplane.new_function("grow", kind="job", image="python:3.11").with_limits(
        mem="128Mi", cpu="500m"
    )


def test_with_autoresize_is_rendered_as_an_annotation_and_a_resize_policy() -> None:
    fn = _job().with_autoresize(max_mem="1Gi", max_cpu="2", step=2, window="1s")
    pod = runplane.render(fn).manifests[0]
    plan = plan_of(pod)
    assert plan == AutoResizePlan(1 << 30, 2000, 2.0, 0.9, 1.0)
    assert json.loads(pod["metadata"]["annotations"][names.AUTORESIZE])["max_memory"] == 1 << 30
    policy = pod["spec"]["containers"][0]["resizePolicy"]
    assert {p["resourceName"]: p["restartPolicy"] for p in policy} == {
        "cpu": "NotRequired",
        "memory": "NotRequired",
    }
    assert "resizePolicy" not in runplane.render(_job()).manifests[0]["spec"]["containers"][0]
    assert plan_of(runplane.render(_job()).manifests[0]) is None
    assert fn.with_autoresize(max_mem=None).spec.autoresize is None  # turned off again


@pytest.mark.parametrize(
    ("arguments", "field", "says"),
    [
        ({"max_mem": "lots"}, "spec.autoresize.max_mem", "memory quantity"),
        ({"max_mem": "0"}, "spec.autoresize.max_mem", "above zero"),
        ({"max_mem": "1Gi", "max_cpu": "0"}, "spec.autoresize.max_cpu", "above zero"),
        ({"max_mem": "1Gi", "step": 1.0}, "spec.autoresize.step", "greater than or equal"),
        ({"max_mem": "1Gi", "threshold": 1.2}, "spec.autoresize.threshold", "less than"),
        ({"max_mem": "1Gi", "window": "2h"}, "spec.autoresize.window", "between"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(
    arguments: dict[str, Any], field: str, says: str
) -> None:
    with pytest.raises(InvalidValueError, match=says) as refused:
        _job().with_autoresize(**arguments)
    assert refused.value.field == field


def test_what_cannot_be_raised_is_refused_when_rendered() -> None:
    with pytest.raises(InvalidValueError, match="at least the memory limit 128Mi"):
        runplane.render(_job().with_autoresize(max_mem="64Mi"))
    with pytest.raises(InvalidValueError, match="at least the CPU limit 500m"):
        runplane.render(_job().with_autoresize(max_mem="1Gi", max_cpu="100m"))
    bare = runplane.new_function("bare", kind="job", image="python:3.11")
    with pytest.raises(InvalidValueError, match="the job has none; set one"):
        runplane.render(bare.with_limits(cpu="1").with_autoresize(max_mem="1Gi"))


def test_the_admins_memory_cap_caps_right_sizing_too() -> None:
    from runplane.config import Settings

    fn = _job().with_autoresize(max_mem="4Gi")
    capped = Settings(retry_limits={"max_memory": "512Mi"})
    assert plan_of(runplane.render(fn, capped).manifests[0]).max_memory == 512 * MI  # type: ignore[union-attr]
    tight = Settings(retry_limits={"max_memory": "64Mi"})  # never below the limit itself
    assert plan_of(runplane.render(fn, tight).manifests[0]).max_memory == 128 * MI  # type: ignore[union-attr]


def test_only_a_job_is_right_sized() -> None:
    with pytest.raises(ConflictError, match="applies to job functions"):
        runplane.new_function("d", kind="dask").with_autoresize(max_mem="1Gi")


def test_the_plan_travels_as_text_and_anything_else_reads_as_none() -> None:
    plan = AutoResizePlan(1 << 30, None, 1.5, 0.9, 2.0)
    assert AutoResizePlan.from_text(plan.to_text()) == plan
    assert AutoResizePlan.from_text("{not json") is None
    assert AutoResizePlan.from_text('{"max_memory": "x"}') is None


@dataclasses.dataclass
class _Group(RunGroup):
    """A run's group as the resizer sees it: what it holds, and the limits set on it."""

    memory: int = 0
    periods: tuple[int, int] = (0, 0)
    limits: list[tuple[int | None, int | None]] = dataclasses.field(default_factory=list)
    path: str = "test"

    def counted(self, texts: Any) -> Counters:
        return Counters(memory=self.memory)

    def counters(self) -> Counters:
        return Counters(memory=self.memory)

    def set_limits(self, memory: int | None, cpu: int | None) -> None:
        self.limits.append((memory, cpu))

    def throttling(self) -> tuple[int, int]:
        return self.periods

    def kill(self) -> None: ...

    def remove(self) -> None: ...


def test_memory_above_the_threshold_for_the_window_is_due_for_a_resize() -> None:
    watch = Watch(AutoResizePlan(300 * MI, None, 2.0, 0.9, 1.0))
    sizes, group = Sizes(128 * MI, None), _Group(memory=100 * MI)
    assert wanted(watch, sizes, group.memory, group.periods, 0.0) is None  # below the threshold
    group.memory = 120 * MI
    assert (
        wanted(watch, sizes, group.memory, group.periods, 10.0) is None
    )  # above it, not for the window yet
    group.memory = 100 * MI
    assert (
        wanted(watch, sizes, group.memory, group.periods, 10.5) is None
    )  # a spike: the window starts again
    group.memory = 120 * MI
    assert wanted(watch, sizes, group.memory, group.periods, 11.0) is None
    memory, cpu, why = wanted(watch, sizes, group.memory, group.periods, 12.0) or (0, 0, "")
    assert (memory, cpu) == (256 * MI, None)
    assert why == "memory 120Mi stayed above 90% of its limit 128Mi for 1 s"
    sizes.memory = 256 * MI
    group.memory = 250 * MI
    watch.above_since = 0.0
    assert (wanted(watch, sizes, group.memory, group.periods, 20.0) or (0,))[
        0
    ] == 300 * MI  # capped at max_mem
    sizes.memory = 300 * MI
    assert (
        wanted(watch, sizes, group.memory, group.periods, 30.0) is None
    )  # at max_mem: nothing more to give


def test_a_throttled_cpu_is_raised_within_max_cpu() -> None:
    watch = Watch(AutoResizePlan(128 * MI, 1500, 2.0, 0.9, 1.0))
    sizes, group = Sizes(128 * MI, 500), _Group(periods=(100, 10))
    assert wanted(watch, sizes, group.memory, group.periods, 0.0) is None
    group.periods = (200, 90)  # throttled in 80 of the last 100 periods
    assert wanted(watch, sizes, group.memory, group.periods, 1.5) == (
        None,
        1000,
        "CPU was throttled in 80 of 100 periods at its limit 500m",
    )


def test_a_resize_is_granted_within_the_room_and_refused_past_it() -> None:
    asked: list[dict[str, int]] = []

    def room(uid: str, more: Any) -> str:
        asked.append(dict(more))
        return "" if more.get("memory", 0) <= 512 * MI else "this machine has no room"

    sizes, group = Sizes(128 * MI, 500), _Group(memory=100 * MI)
    done = resize("u", 1, sizes, group, room, 256 * MI, None, "why")
    assert (done.memory_from, done.memory_to, done.cpu_to, done.outcome) == (
        128 * MI,
        256 * MI,
        500,
        "applied",
    )
    assert group.limits == [(256 * MI, None)]
    assert sizes.memory == 256 * MI
    with pytest.raises(Refused, match="no room"):
        resize("u", 1, sizes, group, room, 2048 * MI, None, "why")
    with pytest.raises(Refused, match="holds 100Mi now"):
        resize("u", 1, sizes, group, room, 64 * MI, None, "why")
    with pytest.raises(Refused, match="these limits already"):
        resize("u", 1, sizes, group, room, 256 * MI, 500, "why")
    assert sizes.memory == 256 * MI  # nothing changed by a refusal
    assert len(group.limits) == 1


def test_a_person_asks_for_quantities_within_bounds() -> None:
    assert amounts("4Gi", "2") == (4 << 30, 2000)
    assert amounts(None, "500m") == (None, 500)
    with pytest.raises(MissingValueError):
        amounts(None, None)
    with pytest.raises(InvalidValueError, match="between 1Mi and 1Pi"):
        amounts("2Pi", None)
    with pytest.raises(InvalidValueError, match="cpu"):
        amounts(None, "two")


def _resized(**fields: Any) -> ResizeRecord:
    values: dict[str, Any] = {
        "at": 110.0,
        "attempt": 1,
        "memory_from": 128 * MI,
        "memory_to": 256 * MI,
        "cpu_from": None,
        "cpu_to": None,
        "why": "memory stayed above 90%",
    }
    return ResizeRecord(**{**values, **fields})


def test_the_usage_chart_marks_each_resize_and_says_it() -> None:
    from runplane.service.usage_samples import Sample

    samples = [Sample(100.0 + i, (100 + 20 * i) * MI, float(i)) for i in range(10)]
    memory, cpu = usage_charts(samples, {"memory": "64Mi"}, {"memory": "128Mi"}, [_resized()])
    assert 'data-marks="1"' in memory.svg
    assert "mark-resize" in memory.svg
    assert "resized in place: at 10s 128Mi → 256Mi (auto)" in memory.words
    assert 'data-marks="0"' in cpu.svg
    refused = _resized(outcome="refused")
    assert "resized" not in usage_charts(samples, {}, {}, [refused])[0].words


def test_suggestions_say_what_resizes_gave() -> None:
    runs = [
        dataclasses.replace(
            record(attempt(1, peak_memory_bytes=300 * MI)), resizes=[_resized(memory_to=512 * MI)]
        )
        for _ in range(3)
    ]
    suggestion = suggest(runs)
    assert suggestion is not None
    assert suggestion.limits["memory"] == "345Mi"
    assert any("resize(s) in place gave attempts up to 512Mi" in n for n in suggestion.notes)


def test_a_record_with_resizes_reads_back_from_json() -> None:
    run = dataclasses.replace(record(attempt(1)), resizes=[_resized(mode="manual", by="bob")])
    again = RunRecord.from_json(json.loads(json.dumps(run.to_json())))
    assert again.resizes == run.resizes
    older = run.to_json()
    del older["resizes"]  # a service from before resizes answers without them
    assert RunRecord.from_json(older).resizes == []

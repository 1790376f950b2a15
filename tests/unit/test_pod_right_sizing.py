"""Right-sizing on a cluster, without one: the pods followed, a resize asked of the pod's
``resize`` subresource when its memory stays near the limit, and a refusal told on the run as a
fallback to the OOM retry."""

from __future__ import annotations

import threading
from typing import Any

import runplane
from runplane.errors import ResizeRefusedError
from runplane.runs import ResizeRecord
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.autoresize import RightSizer, limits_of
from runplane.runtimes.kubernetes.resize import cpu_text, memory_text

MI = 2**20


def _pod(autoresize: bool = True) -> dict[str, Any]:
    fn = runplane.new_function("grow", kind="job", image="python:3.11")
    fn.with_limits(mem="128Mi", cpu="500m")
    if autoresize:
        fn.with_autoresize(max_mem="1Gi", step=2, window="0.2s")
    pod = runplane.render(fn).manifests[0]
    pod["spec"]["nodeName"] = "node-1"
    return pod


class _Resizer:
    """Answers as the pod's resize subresource would: granted, or refused by the kubelet."""

    def __init__(self, refuse: str = "") -> None:
        self.refuse = refuse
        self.asked: list[tuple[str, int | None, str]] = []
        self.done = threading.Event()

    def resize(
        self, uid: str, memory: int | None, cpu: int | None, by: str, why: str, mode: str
    ) -> ResizeRecord:
        self.asked.append((uid, memory, mode))
        self.done.set()
        if self.refuse:
            raise ResizeRefusedError(self.refuse)
        return ResizeRecord(0.0, 1, 128 * MI, memory, None, None, why, mode)


def test_the_limits_are_read_from_the_pod_and_written_as_quantities() -> None:
    assert limits_of(_pod()) == (128 * MI, 500)
    assert (memory_text(256 * MI), memory_text(1000), cpu_text(1500)) == ("256Mi", "1000", "1500m")


def test_a_pod_near_its_limit_is_resized_and_one_without_autoresize_is_not() -> None:
    resizer = _Resizer()
    sizer = RightSizer(lambda node, pod: 120 * MI, resizer, lambda event: None, look=0.01)  # type: ignore[arg-type]
    try:
        sizer.observe("plain", _pod(autoresize=False), True, 1)
        sizer.observe("grown", _pod(), True, 1)
        assert resizer.done.wait(30)
    finally:
        sizer.close()
    assert resizer.asked[0] == ("grown", 256 * MI, "auto")
    assert all(uid == "grown" for uid, _, _ in resizer.asked)


def test_a_refusal_is_told_once_as_a_fallback_and_right_sizing_stops() -> None:
    resizer = _Resizer(refuse="run x cannot be resized: the node says Infeasible: no room")
    told: list[RunEvent] = []
    published = threading.Event()

    def publish(event: RunEvent) -> None:
        told.append(event)
        published.set()

    sizer = RightSizer(lambda node, pod: 125 * MI, resizer, publish, look=0.01)  # type: ignore[arg-type]
    try:
        sizer.observe("grown", _pod(), True, 1)
        assert published.wait(30)
    finally:
        sizer.close()
    (event,) = told
    assert event.resize is not None
    assert (event.resize.outcome, event.resize.memory_to) == ("fallback", 256 * MI)
    assert "an OOM kill is retried with it" in event.message
    assert len(resizer.asked) == 1  # not asked again for this attempt

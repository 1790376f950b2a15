"""The web UI's pictures, drawn on the server as SVG: a run's memory and CPU over time against
its request and limit, a function's recent peaks against its limit, and each node's requested
against allocatable capacity.

Each picture is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>`` that says its
figures in words, and the same words beside it as text: a screen reader, a text browser and
a test read the numbers without the drawing. Nothing here needs JavaScript; a live page
re-renders the fragment that holds a picture as it does the rest of the page.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from runplane.errors import RunplaneError
from runplane.runs import ResizeRecord, RunRecord
from runplane.service.usage_samples import Sample
from runplane.spec.quantity import resource_amount
from runplane.ui.present import duration, millicores, resource, size

_WIDTH, _HEIGHT = 600, 150
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 10, 22
#: The most runs a function's picture shows.
RECENT_RUNS = 20


@dataclass(frozen=True, slots=True)
class Chart:
    """A picture and its figures in words (the same words as its ``<desc>``)."""

    svg: Markup
    words: str


def _amount(name: str, value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        return resource_amount(name, value)
    except (RunplaneError, ValueError, TypeError):
        return None


def _svg(
    key: str,
    title: str,
    words: str,
    body: str,
    height: int = _HEIGHT,
    width: int = _WIDTH,
    **data: Any,
) -> Markup:
    extra = "".join(f' data-{name}="{escape(value)}"' for name, value in data.items())
    return Markup(
        f'<svg class="chart" id="{key}" role="img" aria-labelledby="{key}-t {key}-d" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="xMinYMin meet"{extra} '
        f'xmlns="http://www.w3.org/2000/svg"><title id="{key}-t">{escape(title)}</title>'
        f'<desc id="{key}-d">{escape(words)}</desc>{body}</svg>'
    )


def _guide(y: float, label: str, kind: str) -> str:
    """A dashed line across the plot at ``y`` (a request or a limit), named at its right."""
    return (
        f'<line class="guide guide-{kind}" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y:.1f}" '
        f'y2="{y:.1f}"/><text class="guide-label" x="{_WIDTH - _RIGHT - 2}" y="{y - 3:.1f}" '
        f'text-anchor="end">{escape(label)}</text>'
    )


def _series(
    key: str,
    title: str,
    values: Sequence[tuple[float, float]],
    request: float | None,
    limit: float | None,
    show: Any,
    span: float,
    marks: Sequence[tuple[float, float, float, str]] = (),
) -> Chart:
    """A line of ``values`` ((seconds since the start, amount) pairs) against its guides.
    ``marks`` are in-place resizes (seconds since the start, limit before, limit after, how):
    a mark where each happened, and the limit as it was from there on."""
    top = max([v for _, v in values] + [request or 0, limit or 0, 1e-9] + [m[2] for m in marks])
    top *= 1.1
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def y_of(amount: float) -> float:
        return _TOP + plot_h * (1 - amount / top)

    def x_of(at: float) -> float:
        return _LEFT + plot_w * (at / span if span > 0 else 0)

    body = [
        f'<rect class="plot" x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}"/>',
        f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + 10}" text-anchor="end">'
        f"{escape(show(top))}</text>",
        f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + plot_h}" text-anchor="end">0</text>',
        f'<text class="axis" x="{_LEFT}" y="{_HEIGHT - 6}">0 s</text>',
        f'<text class="axis" x="{_WIDTH - _RIGHT}" y="{_HEIGHT - 6}" text-anchor="end">'
        f"{escape(duration(span))}</text>",
    ]
    if request:
        body.append(_guide(y_of(request), f"request {show(request)}", "request"))
    if limit:
        body.append(_guide(y_of(limit), f"limit {show(limit)}", "limit"))
    for at, before, after, how in marks:
        x = x_of(min(max(at, 0.0), span))
        body.append(
            f'<line class="mark mark-resize" x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" '
            f'y2="{_TOP + plot_h}"><title>{escape(how)}: {escape(show(before))} → '
            f"{escape(show(after))}</title></line>"
            f'<line class="guide guide-limit" x1="{x:.1f}" x2="{_WIDTH - _RIGHT}" '
            f'y1="{y_of(after):.1f}" y2="{y_of(after):.1f}"/>'
            f'<text class="guide-label" x="{x + 3:.1f}" y="{y_of(after) - 3:.1f}">'
            f"{escape(show(after))}</text>"
        )
    points = " ".join(f"{x_of(at):.1f},{y_of(v):.1f}" for at, v in values)
    if values:
        body.append(f'<polyline class="series" points="{points}"/>')
    peak = max((v for _, v in values), default=0.0)
    words = (
        f"{title}: peak {show(peak)}, last {show(values[-1][1])}"
        if values
        else f"{title}: no sample yet"
    )
    words += f"; request {show(request) if request else 'not set'}"
    words += f", limit {show(limit) if limit else 'not set'}"
    words += f"; {len(values)} point{'' if len(values) == 1 else 's'} over {duration(span)}"
    if marks:
        words += "; resized in place: " + ", ".join(
            f"at {duration(max(at, 0.0))} {show(before)} → {show(after)} ({how})"
            for at, before, after, how in marks
        )
    words += "."
    chart = _svg(key, title, words, "".join(body), points=len(values), marks=len(marks))
    return Chart(chart, words)


def usage_charts(
    samples: Sequence[Sample],
    requests: Mapping[str, Any],
    limits: Mapping[str, Any],
    resizes: Sequence[ResizeRecord] = (),
) -> list[Chart]:
    """A run's memory and CPU over time (CPU in cores, from the CPU time between samples),
    with a mark at each in-place resize of its limits."""
    start = samples[0].at if samples else 0.0
    span = samples[-1].at - start if samples else 0.0
    applied = [r for r in resizes if r.applied]
    if applied and not samples:
        start = applied[0].at
    span = max([span] + [r.at - start for r in applied])

    def marks(before: str, after: str) -> list[tuple[float, float, float, str]]:
        found = []
        for r in applied:
            old, new = getattr(r, before), getattr(r, after)
            if old != new and new is not None:
                found.append((r.at - start, float(old or 0), float(new), r.mode))
        return found

    memory = [(s.at - start, float(s.memory_bytes)) for s in samples]
    cores = [
        (b.at - start, max(0.0, (b.cpu_seconds - a.cpu_seconds) / (b.at - a.at)) * 1000)
        for a, b in itertools.pairwise(samples)
        if b.at > a.at
    ]
    return [
        _series(
            "usage-memory",
            "Memory over time",
            memory,
            _amount("memory", requests.get("memory")),
            _amount("memory", limits.get("memory")),
            size,
            span,
            marks("memory_from", "memory_to"),
        ),
        _series(
            "usage-cpu",
            "CPU over time",
            cores,
            _amount("cpu", requests.get("cpu")),
            _amount("cpu", limits.get("cpu")),
            lambda m: millicores(round(m)),
            span,
            marks("cpu_from", "cpu_to"),
        ),
    ]


def peaks_chart(records: Sequence[RunRecord]) -> Chart | None:
    """The peak memory of a function's recent measured runs (oldest left), each against the
    memory limit that run had; ``None`` when no run was measured."""
    runs = [r for r in records if r.peak_memory_bytes][:RECENT_RUNS][::-1]
    if not runs:
        return None
    limits = [_amount("memory", r.limits.get("memory")) for r in runs]
    top = max([r.peak_memory_bytes for r in runs] + [x or 0 for x in limits]) * 1.1
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    step = plot_w / len(runs)
    body = [
        f'<rect class="plot" x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}"/>',
        f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + 10}" text-anchor="end">'
        f"{escape(size(top))}</text>",
        f'<text class="axis" x="{_LEFT - 4}" y="{_TOP + plot_h}" text-anchor="end">0</text>',
        f'<text class="axis" x="{_LEFT}" y="{_HEIGHT - 6}">older</text>',
        f'<text class="axis" x="{_WIDTH - _RIGHT}" y="{_HEIGHT - 6}" text-anchor="end">'
        "newest</text>",
    ]
    for i, (run, limit) in enumerate(zip(runs, limits, strict=True)):
        height = plot_h * run.peak_memory_bytes / top
        x = _LEFT + i * step + step * 0.15
        over = " bar-over" if limit and run.peak_memory_bytes > limit else ""
        body.append(
            f'<rect class="bar{over}" x="{x:.1f}" y="{_TOP + plot_h - height:.1f}" '
            f'width="{step * 0.7:.1f}" height="{height:.1f}"><title>{escape(run.uid[:12])}: '
            f"{escape(size(run.peak_memory_bytes))}</title></rect>"
        )
        if limit:
            y = _TOP + plot_h * (1 - limit / top)
            body.append(
                f'<line class="guide guide-limit" x1="{x - step * 0.1:.1f}" '
                f'x2="{x + step * 0.8:.1f}" y1="{y:.1f}" y2="{y:.1f}"/>'
            )
    shown = [
        f"{size(r.peak_memory_bytes)} of {size(limit) if limit else 'no limit'}"
        for r, limit in zip(runs, limits, strict=True)
    ]
    words = (
        f"Peak memory of the last {len(runs)} measured run{'' if len(runs) == 1 else 's'}, "
        f"oldest first, against each run's memory limit: {'; '.join(shown)}."
    )
    title = "Recent runs' peak memory against their limit"
    return Chart(_svg("peaks", title, words, "".join(body), bars=len(runs)), words)


def node_bars(
    name: str, allocatable: Mapping[str, int], free: Mapping[str, int], key: str
) -> Chart:
    """One bar per resource: what pods request of it (allocatable less free) against what
    the node can hold."""
    rows = [(r, amount) for r, amount in allocatable.items() if amount > 0]
    width, height = 420, _TOP + 26 * len(rows) + 4
    left, plot_w = 90, 420 - 90 - _RIGHT - 110
    body, shown = [], []
    for i, (resource_name, amount) in enumerate(rows):
        used = max(0, amount - free.get(resource_name, 0))
        share = min(1.0, used / amount)
        y = _TOP + 26 * i
        label = f"{resource(resource_name, used)} of {resource(resource_name, amount)}"
        shown.append(f"{resource_name} {label} requested ({share:.0%})")
        full = " bar-over" if share >= 0.9 else ""
        body.append(
            f'<text class="axis" x="{left - 6}" y="{y + 15}" text-anchor="end">'
            f"{escape(resource_name[-12:])}</text>"
            f'<rect class="capacity" x="{left}" y="{y + 3}" width="{plot_w}" height="16"/>'
            f'<rect class="bar{full}" x="{left}" y="{y + 3}" width="{plot_w * share:.1f}" '
            f'height="16"/><text class="axis" x="{left + plot_w + 6}" y="{y + 15}">'
            f"{escape(label)}</text>"
        )
    words = f"{name}: " + ("; ".join(shown) or "no allocatable resource") + "."
    title = f"Requested against allocatable on {name}"
    chart = _svg(key, title, words, "".join(body), height, width, bars=len(rows))
    return Chart(chart, words)


def is_spot(labels: Mapping[str, str], spot_selector: Mapping[str, str]) -> bool:
    """Whether a node's labels mark it spot (every label of the spot-node selector)."""
    return bool(spot_selector) and all(labels.get(k) == v for k, v in spot_selector.items())

"""The pictures: a run's memory and CPU over time (live while it runs, with its figures in
words), a function's recent peaks beside the suggestion, and each node's requested against
allocatable capacity, spot and on-demand apart."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Page, expect

from .conftest import code_function, login
from .test_run_figures import finished

#: Holds 40 MiB for 3 seconds, touching every page so that the group is charged for it.
HOLDER = """\
import time


def hold(context, seconds: float = 3.0):
    held = bytearray(40 * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(seconds)
    return {"held": len(held)}
"""
RESOURCES = {"requests": {"memory": "64Mi", "cpu": "100m"}, "limits": {"memory": "128Mi"}}
MI = 2**20


def points(page: Page, chart: str) -> int:
    """How many points the chart's line has (as drawn, not as said)."""
    line = page.locator(f"svg#{chart} polyline.series")
    if not line.count():
        return 0
    return len((line.get_attribute("points") or "").split())


def mebibytes_said(words: str, what: str) -> float:
    found = re.search(rf"{what} ([\d.]+)(Ki|Mi|Gi)", words)
    assert found, words
    scale = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}[found.group(2)]
    return float(found.group(1)) * scale


def test_a_run_shows_its_memory_and_cpu_over_time_live(page: Page, api: httpx.Client) -> None:
    fn = code_function("holder", "charts", HOLDER, "hold", resources=RESOURCES)
    uid = api.post("/runs", json={"function": fn, "params": {"seconds": 6}}).json()["uid"]
    deadline = time.monotonic() + 60
    while api.get(f"/runs/{uid}").json()["state"] != "running":
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.1)
    login(page)
    page.goto(f"/ui/runs/{uid}")
    # While it runs the picture grows without a reload: the page's live fragment brings it.
    expect(page.locator("svg#usage-memory")).to_be_visible()
    page.wait_for_function(
        "() => Number(document.querySelector('svg#usage-memory')?.dataset.points) >= 3",
        timeout=30_000,
    )
    seen = points(page, "usage-memory")
    assert seen >= 3
    run = finished(api, uid)
    assert run["state"] == "completed", run
    expect(page.locator("#run-state")).to_have_text("completed", timeout=30_000)
    page.reload()
    memory = page.locator("svg#usage-memory")
    drawn = points(page, "usage-memory")
    assert drawn >= seen
    assert memory.get_attribute("data-points") == str(drawn)
    assert points(page, "usage-cpu") == drawn - 1  # a rate between two samples
    # Its figures in words, beside it and as its description, match the run's own.
    words = page.locator("#usage figcaption").first.inner_text()
    assert memory.locator("desc").text_content() == words
    assert mebibytes_said(words, "peak") >= 40
    assert "request 64Mi" in words
    assert "limit 128Mi" in words
    expect(page.locator("svg#usage-memory line.guide-limit")).to_have_count(1)
    expect(page.locator("svg#usage-memory title")).to_have_text("Memory over time")
    cpu_words = page.locator("#usage figcaption").nth(1).inner_text()
    assert "request 100m" in cpu_words
    assert "limit not set" in cpu_words


def test_a_function_shows_its_recent_peaks_beside_the_suggestion(
    page: Page, api: httpx.Client
) -> None:
    fn = code_function("peaks", "charts-peaks", HOLDER, "hold", resources=RESOURCES)
    assert api.post("/functions", json=fn).status_code == 201
    for _ in range(2):
        uid = api.post("/runs", json={"function": fn, "params": {"seconds": 0.5}}).json()["uid"]
        assert finished(api, uid)["state"] == "completed"
    login(page)
    page.goto("/ui/projects/charts-peaks/functions/peaks")
    section = page.get_by_role("region", name="Suggested resources")
    chart = section.locator("svg#peaks")
    expect(chart).to_be_visible()
    expect(chart).to_have_attribute("data-bars", "2")
    expect(chart.locator("rect.bar")).to_have_count(2)
    expect(chart.locator("line.guide-limit")).to_have_count(2)
    words = section.locator("figcaption").inner_text()
    assert "last 2 measured runs" in words
    assert words.count("of 128Mi") == 2


def test_the_cluster_page_draws_requested_against_allocatable(page: Page) -> None:
    login(page)
    page.goto("/ui/cluster")
    capacity = page.get_by_role("region", name="Requested against allocatable")
    expect(capacity.get_by_role("heading", name=re.compile("^Spot nodes"))).to_be_visible()
    expect(capacity.get_by_role("heading", name=re.compile("^On-demand nodes"))).to_be_visible()
    # The embedded default's one machine is on-demand: one picture, a bar per resource.
    on_demand = capacity.locator("figure[data-kind='on-demand']")
    expect(on_demand).to_have_count(1)
    chart = on_demand.locator("svg")
    expect(chart.locator("rect.bar")).to_have_count(int(chart.get_attribute("data-bars") or 0))
    words = on_demand.locator("figcaption").inner_text()
    assert re.search(r"cpu [\d.]+m? of 2 requested", words), words
    assert "memory" in words
    assert chart.locator("desc").text_content() == words

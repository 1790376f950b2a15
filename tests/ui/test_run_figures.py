"""The figures a run's pages show are true: a short run's peak memory and CPU time are its
process's own, and the Why pending column speaks only of runs that wait."""

from __future__ import annotations

import time

import httpx
from playwright.sync_api import Page, expect

from .conftest import code_function, login

#: A three-second job that holds 40 MiB and says what resident set its process reached.
SHORT = """\
import resource
import time


def short(context):
    held = bytearray(40 * 2**20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(3)
    return {"own_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
"""
SLEEPER = "import time\n\ndef nap(context):\n    time.sleep(60)\n"


def finished(api: httpx.Client, uid: str) -> dict[str, object]:
    deadline = time.monotonic() + 90
    while (run := api.get(f"/runs/{uid}").json())["state"] not in ("completed", "error", "aborted"):
        assert time.monotonic() < deadline, f"run {uid} did not finish"
        time.sleep(0.1)
    return dict(run)


def test_a_short_run_shows_its_real_peak_memory_and_cpu_time(page: Page, api: httpx.Client) -> None:
    fn = code_function("short", "figures", SHORT, "short")
    uid = api.post("/runs", json={"function": fn}).json()["uid"]
    run = finished(api, uid)
    assert run["state"] == "completed", run
    # What it held and the interpreter holding it, as a pod's container is charged: never
    # only the few MiB a forked process adds to its fork server's pages.
    assert run["results"]["own_peak"] > 40 * 2**20  # type: ignore[index]
    assert run["peak_memory_bytes"] > 45 * 2**20  # type: ignore[operator]
    assert run["cpu_seconds"] > 0  # type: ignore[operator]
    login(page)
    page.goto(f"/ui/runs/{uid}")
    status = page.get_by_role("region", name="Status")
    peak = status.get_by_role("row", name="Peak memory").get_by_role("cell")
    expect(peak).not_to_have_text("0")
    assert float(peak.inner_text().removesuffix("Mi")) > 45
    cpu = status.get_by_role("row", name="CPU time").get_by_role("cell")
    expect(cpu).not_to_have_text("0.00 s")
    expect(cpu).not_to_have_text("0 s")


def test_why_pending_is_empty_for_runs_that_do_not_wait(page: Page, api: httpx.Client) -> None:
    fn = code_function("nap", "figures-why", SLEEPER, "nap")
    uid = api.post("/runs", json={"function": fn}).json()["uid"]
    deadline = time.monotonic() + 60
    while api.get(f"/runs/{uid}").json()["state"] != "running":
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.1)
    assert api.post(f"/runs/{uid}/abort").status_code in (200, 202)
    run = finished(api, uid)
    assert run["state"] == "aborted", run
    assert run["reason"], run
    login(page)
    page.goto("/ui/projects/figures-why/jobs")
    row = page.locator(f"#run-{uid}")
    expect(row.locator(".state")).to_have_text("aborted")
    expect(row.locator("td.why")).to_have_text("")
    expect(row.locator(".reason")).to_have_text(str(run["reason"]))

"""Pages that follow runs as they change: the runs list and a run's logs, without a reload."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.sync_api import Browser, Page, expect

from .conftest import code_function, login, shot

#: Prints a line at a time until told to stop (a file appears), then ends.
TICKER = """\
import os
import time


def tick(context, stop: str = ""):
    n = 0
    while not os.path.exists(stop):
        n += 1
        print(f"tick {n}", flush=True)
        time.sleep(0.2)
    print("stopping", flush=True)
    return {"ticks": n}
"""


def ticker(api: httpx.Client, project: str, stop: Path) -> str:
    fn = code_function("ticker", project, TICKER, "tick", resources={"requests": {"cpu": "100m"}})
    created = api.post("/runs", json={"function": fn, "params": {"stop": str(stop)}})
    assert created.status_code == 201, created.text
    return str(created.json()["uid"])


def mark(page: Page) -> None:
    """A mark a reload would wipe: tests check it is still there."""
    page.evaluate("window.__notReloaded = true")


def not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("window.__notReloaded === true"))


def test_runs_list_shows_new_runs_and_state_changes_without_reload(
    page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    login(page)
    page.goto("/ui/projects/live/jobs")
    expect(page.get_by_text("No runs yet.")).to_be_visible()
    mark(page)
    stop = tmp_path / "stop"
    uid = ticker(api, "live", stop)
    row = page.locator(f"#run-{uid}")
    expect(row.locator(".state")).to_have_text("running", timeout=30_000)
    expect(row).to_contain_text("alice")
    expect(row).to_contain_text("cpu 100m")
    shot(page, "jobs")
    stop.touch()
    expect(row.locator(".state")).to_have_text("completed", timeout=30_000)
    assert not_reloaded(page)


def test_logs_stream_while_the_run_runs(page: Page, api: httpx.Client, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    uid = ticker(api, "live-logs", stop)
    login(page)
    page.goto(f"/ui/runs/{uid}")
    mark(page)
    logs = page.locator("#logs")
    expect(logs).to_contain_text("tick 3", timeout=30_000)
    expect(page.locator("#run-state")).to_have_text("running")
    expect(logs).to_contain_text("tick 6", timeout=30_000)  # more arrives as it is written
    stop.touch()
    expect(page.locator("#run-state")).to_have_text("completed", timeout=30_000)
    expect(logs).to_contain_text("stopping")
    expect(page.get_by_role("button", name="Abort")).to_have_count(0)
    text = logs.inner_text()
    ticks = [line for line in text.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {n}" for n in range(1, len(ticks) + 1)]  # each once, in order
    assert not_reloaded(page)


def test_abort_from_the_run_page(page: Page, api: httpx.Client, tmp_path: Path) -> None:
    uid = ticker(api, "aborts", tmp_path / "never")
    login(page)
    page.goto(f"/ui/runs/{uid}")
    expect(page.locator("#run-state")).to_have_text("running", timeout=30_000)
    page.get_by_role("button", name="Abort").click()
    expect(page.locator("#run-state")).to_have_text("aborted", timeout=30_000)
    assert api.get(f"/runs/{uid}").json()["state"] == "aborted"


def test_pages_read_without_javascript(
    browser: Browser, base_url: str, api: httpx.Client, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    stop.touch()
    uid = ticker(api, "no-js", stop)
    context = browser.new_context(base_url=base_url, java_script_enabled=False)
    page = context.new_page()
    login(page)
    page.goto("/ui/projects/no-js/jobs")
    expect(page.locator(f"#run-{uid}")).to_be_visible()
    page.get_by_label("State").select_option("completed")
    page.get_by_role("button", name="Filter").click()
    page.goto(f"/ui/runs/{uid}")
    expect(page.get_by_role("heading", name="Logs")).to_be_visible()
    context.close()

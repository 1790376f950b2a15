"""The run page's "Resize in place" form: a refusal said beside the form in the kernel's or
the machine's words, a granted resize listed with the run and marked on its memory chart."""

from __future__ import annotations

import time

import httpx
from playwright.sync_api import Page, expect

from tests.growing import GROWING

from .conftest import code_function, login


def test_a_running_job_is_resized_from_its_page(page: Page, api: httpx.Client) -> None:
    resources = {"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}
    fn = code_function("growing", "resize-ui", GROWING, "handler", resources=resources)
    body = {"function": fn, "params": {"room_wait": "120"}}
    uid = api.post("/runs", json=body).json()["uid"]
    deadline = time.monotonic() + 60
    while api.get(f"/runs/{uid}").json()["state"] != "running":
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.1)
    login(page)
    page.goto(f"/ui/runs/{uid}")
    form = page.get_by_role("region", name="Resize in place")
    form.get_by_label("Memory limit").fill("64Gi")
    form.get_by_role("button", name="Resize").click()
    expect(page.locator("#resize-error")).to_contain_text("unreserved, less than")
    form = page.get_by_role("region", name="Resize in place")
    form.get_by_label("Memory limit").fill("512Mi")
    form.get_by_role("button", name="Resize").click()
    expect(page.locator("#resizes")).to_contain_text("128Mi → 512Mi")
    expect(page.locator("#resizes")).to_contain_text("manual (alice)")
    deadline = time.monotonic() + 240
    while (run := api.get(f"/runs/{uid}").json())["state"] == "running":
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.2)
    assert run["state"] == "completed", run
    page.goto(f"/ui/runs/{uid}")
    expect(page.get_by_role("region", name="Resize in place")).to_have_count(0)
    expect(page.locator("#usage-memory")).to_have_attribute("data-marks", "1")
    words = page.locator("#usage .chart-words").first
    expect(words).to_contain_text("resized in place: at")
    expect(words).to_contain_text("128Mi → 512Mi (manual)")

"""Serving functions in the UI: created with their spot mode from ML functions, and deployed
with replicas checked as typed."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from .conftest import code_function, login

SERVE = "def handler(context, event):\n    return {'echo': event}\n"


def test_a_serving_function_is_created_with_its_spot_mode(
    page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    code = tmp_path / "serve.py"
    code.write_text(SERVE)
    login(page)
    page.goto("/ui/projects/serving-ui/functions")
    page.get_by_role("link", name="New serving function").click()
    expect(page.get_by_role("heading", name=re.compile("New serving function"))).to_be_visible()
    page.get_by_label("Name", exact=True).fill("echo")
    page.get_by_label("Code file (.py)").set_input_files(str(code))
    page.get_by_label("Memory limit").fill("256Mi")
    page.get_by_label("Run on Spot nodes").select_option("allow")
    page.get_by_label("Replicas min").fill("1")
    page.get_by_label("Replicas max").fill("3")
    page.get_by_role("button", name="Create serving function").click()
    expect(page.get_by_role("status")).to_contain_text("Saved as version")
    stored = api.get("/projects/serving-ui/functions/echo").json()["function"]
    assert stored["kind"] == "serving"
    assert stored["spec"]["handler"] == "handler"
    assert stored["spec"]["preemption_mode"] == "allow"
    assert stored["spec"]["min_replicas"] == 1
    assert stored["spec"]["max_replicas"] == 3
    assert stored["spec"]["resources"] == {"limits": {"memory": "256Mi"}}
    page.goto("/ui/projects/serving-ui/functions")
    page.get_by_label("Actions for echo").click()
    expect(page.get_by_role("link", name="Deploy")).to_be_visible()


def test_deploy_checks_min_and_max_as_typed(page: Page, api: httpx.Client) -> None:
    fn = code_function("replicated", "serving-ui", SERVE, "handler", max_replicas=2)
    fn["kind"] = "serving"
    assert api.post("/functions", json=fn).status_code == 201
    login(page)
    page.goto("/ui/projects/serving-ui/functions/replicated/deploy")
    page.get_by_label("Replicas min").fill("3")
    page.get_by_label("Replicas max").fill("1")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("#err-min_replicas")).to_have_text(
        "Replicas min: 3 is above Replicas max 1; min must be at most max (example: 1 and 4)"
    )
    expect(page.get_by_label("Replicas min")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Replicas max")).to_have_value("1")  # what was typed stays

    page.get_by_label("Replicas min").fill("5")
    page.get_by_label("Replicas max").fill("9")
    page.get_by_role("button", name="Deploy").click()
    expect(page.locator("#err-min_replicas")).to_have_text("")
    spec = api.get("/projects/serving-ui/functions/replicated").json()["function"]["spec"]
    assert (spec["min_replicas"], spec["max_replicas"]) == (5, 9)

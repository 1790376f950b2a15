"""ML functions (Edit → Resources saves a version), Common Parameters by role, Cluster, and
the accessible name of every control of every page."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from .conftest import USER_TOKEN, code_function, login, shot

CODE = "def train(context, epochs: int = 1):\n    return {'epochs': epochs}\n"


def test_edit_resources_saves_a_new_function_version(page: Page, api: httpx.Client) -> None:
    fn = code_function("trainer", "models", CODE, "train", resources={"requests": {"cpu": "1"}})
    assert api.post("/functions", json=fn).status_code == 201
    login(page)
    page.goto("/ui/projects/models/functions")
    shot(page, "functions")
    page.get_by_label("Actions for trainer").click()
    page.get_by_role("link", name="Edit").click()
    expect(page.get_by_role("heading", name=re.compile("Edit trainer"))).to_be_visible()
    expect(page.get_by_label("CPU request")).to_have_value("1")
    page.get_by_label("Memory limit").fill("512Mi")
    page.get_by_label("Pods Priority").select_option("low")
    page.get_by_label("Run on Spot nodes").select_option("allow")
    page.get_by_label("Volumes", exact=True).select_option("none")
    shot(page, "function-edit", full_page=True)
    page.get_by_role("button", name="Save as new version").click()
    expect(page.get_by_role("status")).to_contain_text("Saved as version")
    expect(page.locator("tbody tr")).to_have_count(2)
    versions = api.get("/projects/models/functions/trainer/versions").json()
    newest = versions[0]["function"]["spec"]
    assert newest["priority_class_name"] == "low"
    assert newest["preemption_mode"] == "allow"
    assert newest["disable_auto_mount"] is True
    assert newest["resources"] == {"requests": {"cpu": "1"}, "limits": {"memory": "512Mi"}}
    assert versions[1]["function"]["spec"]["resources"] == {"requests": {"cpu": "1"}}


def test_a_function_page_says_what_its_runs_suggest(page: Page, api: httpx.Client) -> None:
    fn = code_function("sized", "models", CODE, "train")
    assert api.post("/functions", json=fn).status_code == 201
    uid = api.post("/runs", json={"function": fn}).json()["uid"]
    deadline = time.monotonic() + 60
    while api.get(f"/runs/{uid}").json()["state"] not in ("completed", "error"):
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.1)
    login(page)
    page.goto("/ui/projects/models/functions/sized")
    section = page.get_by_role("region", name="Suggested resources")
    expect(section).to_contain_text("too few runs: 1 of 3 measured attempts needed")
    expect(section).to_contain_text("From 1 measured attempt(s); peak memory")


def test_a_refused_edit_says_why_at_the_field(page: Page, api: httpx.Client) -> None:
    fn = code_function("strict", "models", CODE, "train")
    api.post("/functions", json=fn)
    login(page)
    page.goto("/ui/projects/models/functions/strict/edit")
    page.get_by_label("Memory request").fill("2Gi")
    page.get_by_label("Memory limit").fill("1Gi")
    page.get_by_role("button", name="Save as new version").click()
    expect(page.locator("#err-mem_limit")).to_have_text(
        "Memory limit: '1Gi' is below the Memory request '2Gi'; a request must be at most its "
        "limit: raise the limit or lower the request"
    )
    assert len(api.get("/projects/models/functions/strict/versions").json()) == 1


def test_deploy_says_where_serving_functions_go(page: Page, api: httpx.Client) -> None:
    serving = {"kind": "serving", "metadata": {"name": "predictor", "project": "models"}}
    assert api.post("/functions", json=serving).status_code == 201
    login(page)
    page.goto("/ui/projects/models/functions")
    page.get_by_label("Actions for predictor").click()
    page.get_by_role("link", name="Deploy").click()
    page.get_by_label("Replicas min").fill("1")
    page.get_by_label("Replicas max").fill("4")
    page.get_by_label("Workers").fill("2")
    page.get_by_role("button", name="Deploy").click()
    # A stored function with no code: refused before a replica starts, saying what is missing.
    expect(page.get_by_role("alert")).to_contain_text(
        "a serving function needs its code embedded and the handler to call"
    )


def test_users_read_defaults_admins_change_them(page: Page, api: httpx.Client) -> None:
    login(page, USER_TOKEN)
    page.goto("/ui/settings")
    expect(page.locator("#readonly-note")).to_contain_text("only admins may")
    expect(page.get_by_label("Memory request")).to_have_attribute("readonly", "")
    expect(page.get_by_label("Priority class")).to_be_disabled()
    expect(page.get_by_role("button", name="Save")).to_be_disabled()
    # Sent anyway (the controls enabled by hand): the service refuses with its 403.
    page.evaluate(
        "document.querySelectorAll('#defaults-form [disabled], #defaults-form [readonly]')"
        ".forEach(e => { e.disabled = false; e.readOnly = false; })"
    )
    page.get_by_label("Memory request").fill("999Mi")
    with page.expect_response(re.compile("/ui/settings$")) as answer:
        page.get_by_role("button", name="Save").click()
    assert answer.value.status == 403
    expect(page.get_by_role("alert")).to_have_text(
        "user 'bob' may not change service defaults; only admins may"
    )
    assert "999Mi" not in str(api.get("/defaults").json())

    page.context.clear_cookies()
    login(page)
    page.goto("/ui/settings")
    shot(page, "common-parameters", full_page=True)
    before = api.get("/defaults").json()
    try:
        page.get_by_label("Memory request").fill("96Mi")
        page.get_by_label("Priority class").select_option("low")
        page.get_by_label("GPU limit").fill("1")
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("status")).to_have_text("Saved.")
        expect(page.get_by_label("Memory request")).to_have_value("96Mi")
        expect(page.get_by_label("GPU limit")).to_have_value("1")
        after = api.get("/defaults").json()
        assert after["resources"]["requests"]["memory"] == "96Mi"
        assert after["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert after["priority_class"] == "low"
        page.get_by_label("Memory request").fill("lots")
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("alert")).to_contain_text("lots")
        assert api.get("/defaults").json() == after  # refused whole
    finally:
        api.patch("/defaults", json={"resources": None, "priority_class": None})
    assert api.get("/defaults").json() == before


def test_cluster_shows_capacity_labels_and_what_runs_where(page: Page) -> None:
    login(page)
    page.goto("/ui/cluster")
    expect(page.get_by_role("heading", name=re.compile("^Cluster"), level=1)).to_be_visible()
    capacity = page.locator("table").first
    expect(capacity).to_contain_text("4Gi")
    expect(page.get_by_text("app.iguazio.com/lifecycle=non-preemptible")).to_be_visible()
    shot(page, "cluster")


PAGES = [
    "/ui/",
    "/ui/projects/flow/jobs",
    "/ui/projects/churn-models/jobs",
    "/ui/projects/flow/jobs/new",
    "/ui/projects/models/functions",
    "/ui/projects/models/functions/trainer",
    "/ui/projects/models/functions/trainer/edit",
    "/ui/projects/models/serving/new",
    "/ui/projects/nightly/schedules",
    "/ui/settings",
    "/ui/cluster",
    "/ui/new-project",
    "/ui/projects/flow/settings",
    "/ui/projects/flow/quotas",
]
#: Roles whose nodes a user operates or reads: each must have a name.
CONTROLS = {"button", "textbox", "combobox", "checkbox", "link", "DisclosureTriangle"}


def unnamed_controls(page: Page) -> list[dict[str, Any]]:
    """Controls whose accessible name, as Chromium computes it, is empty."""
    cdp = page.context.new_cdp_session(page)
    tree = cdp.send("Accessibility.getFullAXTree")["nodes"]
    cdp.detach()
    return [
        node
        for node in tree
        if not node.get("ignored")
        and node.get("role", {}).get("value") in CONTROLS
        and not str(node.get("name", {}).get("value", "")).strip()
    ]


@pytest.mark.parametrize("path", PAGES)
def test_every_control_has_an_accessible_name(page: Page, path: str) -> None:
    login(page)
    page.goto(path)
    assert unnamed_controls(page) == []


def test_the_resources_pane_controls_are_named_as_the_documents_name_them(page: Page) -> None:
    login(page)
    page.goto("/ui/projects/flow/jobs/new")
    for name in (
        "Function",
        "Memory request",
        "Memory limit",
        "CPU request",
        "CPU limit",
        "GPU limit",
        "Run on Spot nodes",
        "Pods Priority",
        "Volumes",
        "Cron schedule",
    ):
        control = page.get_by_label(name, exact=True)
        expect(control).to_have_count(1)
        expect(control).to_have_accessible_name(name)
    page.get_by_role("group", name="Node Selector").get_by_role("button", name="+").click()
    expect(page.get_by_role("textbox", name="Key", exact=True)).to_be_visible()
    expect(page.get_by_role("textbox", name="Value", exact=True)).to_be_visible()
    for button in ("Run now", "Schedule for later"):
        expect(page.get_by_role("button", name=button)).to_be_visible()

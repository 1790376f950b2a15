"""A project's budget in the browser: an admin sets it on the project's settings page (a bad
amount refused at its field), the project's runs page shows the spend against it, a run the
budget holds says why it is pending, and clearing the budget lets it start; a user sees the
budget read-only."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from .conftest import USER_TOKEN, code_function, login

CODE = "def handler(context):\n    return {'ok': 1}\n"


def test_an_admin_sets_a_budget_on_the_project_page_and_a_held_run_starts(
    page: Page, api: httpx.Client
) -> None:
    assert api.post("/projects", json={"name": "budgeted"}).status_code in (200, 201)
    login(page)
    page.goto("/ui/projects/budgeted/settings")
    budget = page.locator("#budget")
    expect(budget.locator("#budget-standing")).to_contain_text("No budget")
    amount = page.get_by_label("Amount per period")
    amount.fill("\uff15\uff10")  # full-width digits: refused at the field, as the API does
    page.get_by_label("At the limit").select_option("hold")
    page.get_by_role("button", name="Set budget").click()
    expect(page.locator("#err-amount")).to_contain_text("ASCII digits")
    expect(page.locator("#err-amount")).to_contain_text("example: 500")
    expect(page.get_by_label("Amount per period")).to_have_attribute("aria-invalid", "true")
    assert api.get("/projects/budgeted/budget").json()["budget"] is None

    page.get_by_label("Amount per period").fill("0")
    page.get_by_label("Period", exact=True).select_option("week")
    page.get_by_label("At the limit").select_option("hold")
    page.get_by_role("button", name="Set budget").click()
    expect(page).to_have_url(re.compile(r"/ui/projects/budgeted/settings#budget$"))
    expect(page.locator("#budget-standing")).to_contain_text(
        "budget: project budgeted spent 0.00 of 0 this week"
    )
    expect(page.locator("#budget-standing")).to_contain_text("new runs wait pending")
    stored = api.get("/projects/budgeted/budget").json()["budget"]
    assert (stored["amount"], stored["period"], stored["action"]) == (0, "week", "hold")

    made = api.post("/runs", json={"function": code_function("held", "budgeted", CODE, "handler")})
    assert made.status_code == 201, made.text
    uid = made.json()["uid"]
    page.goto("/ui/projects/budgeted/jobs")
    expect(page.locator("#budget-banner")).to_contain_text(
        "budget: project budgeted spent 0.00 of 0 this week — budget reached (hold)"
    )
    page.goto(f"/ui/runs/{uid}")
    expect(page.locator("#run-state")).to_have_text("pending")
    expect(page.locator("#run-why")).to_have_text(
        "Budget: budget: project budgeted spent 0.00 of 0 this week"
    )

    page.goto("/ui/projects/budgeted/settings")
    page.get_by_role("button", name="Clear budget").click()
    expect(page.locator("#budget-standing")).to_contain_text("No budget")
    page.goto(f"/ui/runs/{uid}")
    expect(page.locator("#run-state")).to_have_text("completed", timeout=60_000)


def test_a_user_sees_the_budget_read_only(page: Page, api: httpx.Client) -> None:
    assert api.post("/projects", json={"name": "watched"}).status_code in (200, 201)
    answer = api.put("/projects/watched/budget", json={"amount": 250, "action": "warn"})
    assert answer.status_code == 200, answer.text
    login(page, USER_TOKEN)
    page.goto("/ui/projects/watched/settings")
    expect(page.locator("#budget-standing")).to_contain_text(
        "budget: project watched spent 0.00 of 250 this month"
    )
    expect(page.locator("#budget-readonly")).to_be_visible()
    expect(page.locator("#budget-form")).to_have_count(0)


def test_new_job_shows_the_expected_cost_and_the_budget_before_run_now(
    page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    assert api.post("/projects", json={"name": "estimated"}).status_code in (200, 201)
    assert api.put("/projects/estimated/budget", json={"amount": 40}).status_code == 200
    code = tmp_path / "train.py"
    code.write_text("def train(context):\n    return 1\n")
    login(page)
    page.goto("/ui/projects/estimated/jobs/new")
    page.get_by_label("Code file (.py)").set_input_files(str(code))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.get_by_label("Memory request").fill("64Mi")
    page.get_by_label("CPU request").click()
    # This service has no prices: the check says so, with the project's budget.
    expect(page.locator("#estimate")).to_have_text(
        "Cost: no cost to estimate: no node-group prices are configured (service.node_groups)"
    )
    expect(page.locator("#estimate-budget")).to_have_text(
        "budget: project estimated spent 0.00 of 40 this month"
    )

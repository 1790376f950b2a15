"""A project's Quotas page: an admin sets a flavor's quota with the form (a bad quantity is
refused at its field, the rest kept), a user sees the usage against it and no form."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from .conftest import USER_TOKEN, login, shot


def test_an_admin_sets_a_quota_and_a_user_sees_it(page: Page, api: httpx.Client) -> None:
    assert api.post("/projects", json={"name": "quota-team"}).status_code in (200, 201)
    login(page)
    page.goto("/ui/projects/quota-team/jobs")
    menu = page.get_by_role("navigation", name="Main menu")
    menu.get_by_role("link", name="Quotas").click()
    expect(page).to_have_url(re.compile(r"/ui/projects/quota-team/quotas$"))
    expect(page.locator("#no-quota")).to_be_visible()

    page.get_by_label("Flavor").select_option("on-demand")
    page.get_by_label("CPU", exact=True).fill("١٦")  # not ASCII digits: refused at the field
    page.get_by_label("Memory").fill("64Gi")
    page.get_by_role("button", name="Save quota").click()
    expect(page.locator("#err-cpu")).to_contain_text("is not valid")
    expect(page.get_by_label("CPU", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Memory")).to_have_value("64Gi")
    assert api.get("/projects/quota-team/quotas").json()["flavors"] == {}

    page.get_by_label("CPU", exact=True).fill("16")
    page.get_by_label("GPUs").fill("2")
    page.get_by_label("May borrow other projects' idle quota").uncheck()
    page.get_by_role("button", name="Save quota").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    table = page.get_by_role("table", name="Quota usage")
    expect(table.get_by_role("row", name=re.compile("on-demand cpu 0 16 0"))).to_be_visible()
    stored = api.get("/projects/quota-team/quotas").json()["flavors"]["on-demand"]
    assert stored["memory"]["nominal"] == "64Gi"
    assert stored["gpus"]["borrowing_limit"] == "0"
    shot(page, "project-quotas")

    page.context.clear_cookies()
    login(page, USER_TOKEN)
    page.goto("/ui/projects/quota-team/quotas")
    expect(page.get_by_role("table", name="Quota usage")).to_contain_text("64Gi")
    expect(page.locator("#readonly-note")).to_have_text("Only admins set quotas.")
    expect(page.locator("#quota-form")).to_have_count(0)

"""Projects as records: one created through the API appears in the left menu and on the
Projects page, and its page shows its description and parameters above its Jobs and
Workflows."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from .conftest import USER_TOKEN, login, shot


def test_a_project_created_through_the_api_has_its_page(page: Page, api: httpx.Client) -> None:
    body = {
        "name": "churn-models",
        "description": "Churn prediction for the growth team",
        "params": {"label_column": "churned", "test_size": 0.2},
        "default_image": "python:3.11",
    }
    assert api.post("/projects", json=body).status_code in (200, 201)
    login(page, USER_TOKEN)  # a user sees every project, whoever made it
    page.goto("/ui/")
    menu = page.get_by_role("navigation", name="Main menu")
    expect(menu.get_by_role("link", name="churn-models")).to_be_visible()
    card = page.get_by_role("main").get_by_role("link", name=re.compile("churn-models"))
    expect(card).to_contain_text("Churn prediction for the growth team")

    menu.get_by_role("link", name="churn-models").click()
    expect(page).to_have_url(re.compile(r"/ui/projects/churn-models/jobs$"))
    expect(page.get_by_role("heading", name=re.compile("Jobs and Workflows"))).to_be_visible()
    main = page.get_by_role("main")
    expect(main.get_by_text("Churn prediction for the growth team")).to_be_visible()
    params = page.get_by_role("table", name="Project parameters")
    expect(params.get_by_role("row", name=re.compile("label_column"))).to_contain_text('"churned"')
    expect(params.get_by_role("row", name=re.compile("test_size"))).to_contain_text("0.2")
    expect(main.get_by_role("row", name=re.compile("Default image"))).to_contain_text("python:3.11")
    expect(main.get_by_role("row", name="Owner alice")).to_be_visible()
    expect(menu.get_by_role("link", name="Jobs and Workflows")).to_have_attribute(
        "aria-current", "page"
    )
    shot(page, "project")

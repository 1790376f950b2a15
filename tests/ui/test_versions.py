"""Function versions in the UI: the version just saved is the latest, always, and Edit and Run
open it."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from .conftest import login

CODE = "def train(context, epochs: int = 1):\n    return {'epochs': epochs}\n"


def save_from_new_job(page: Page, code: Path, memory: str) -> str:
    """Save the uploaded code as the ML function ``versioned`` with ``memory`` requested;
    the version the page says it saved."""
    page.goto("/ui/projects/versions/jobs/new")
    page.get_by_label("Code file (.py)").set_input_files(str(code))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.wait_for_load_state("networkidle")  # the form as the upload refreshed it
    page.get_by_label("Name", exact=True).fill("versioned")
    page.get_by_label("Memory request").fill(memory)
    page.get_by_role("button", name="Save as ML function").click()
    expect(page).to_have_url(re.compile(r"/functions/versioned\?saved="))
    status = page.get_by_role("status")
    expect(status).to_contain_text("Saved as version")
    return status.locator("code").inner_text()


def test_the_version_just_saved_is_the_latest_and_edit_and_run_open_it(
    page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    code = tmp_path / "train.py"
    code.write_text(CODE)
    login(page)
    first = save_from_new_job(page, code, "64Mi")
    second = save_from_new_job(page, code, "128Mi")
    assert second != first
    again = save_from_new_job(page, code, "64Mi")  # the first version's settings again
    assert again == first
    latest = page.locator("tbody tr").first
    expect(latest).to_contain_text(f"{first} (latest)")
    expect(page.locator("tbody tr")).to_have_count(2)
    assert api.get("/projects/versions/functions/versioned").json()["hash"].startswith(first)

    page.get_by_role("link", name="Edit", exact=True).click()
    expect(page.get_by_label("Memory request")).to_have_value("64Mi")
    page.goto("/ui/projects/versions/functions")
    expect(page.locator("#function-versioned")).to_contain_text(first)
    page.get_by_label("Actions for versioned").click()
    page.get_by_role("link", name="Run", exact=True).click()
    expect(page).to_have_url(re.compile(r"/jobs/new\?function=versioned"))
    expect(page.get_by_label("Memory request")).to_have_value("64Mi")

"""A project's runs, a page at a time: Next page and First page swap the list in place (no new
document), the address follows, and Back and Forward show the pages again, read again whole:
the tab keeps no copy of them, so they are as current as the service."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from runplane.ui.pages.runs import PAGE_SIZE

from .conftest import code_function, login
from .test_live import mark, not_reloaded

CODE = "def handler(context):\n    return 1\n"


def held_runs(api: httpx.Client, project: str, count: int) -> list[str]:
    """``count`` runs that wait (a budget of 0 holds them): recorded at once, never run."""
    if api.get(f"/projects/{project}").status_code == 404:
        assert api.post("/projects", json={"name": project}).status_code in (200, 201)
        budget = {"amount": 0, "period": "week", "action": "hold"}
        assert api.put(f"/projects/{project}/budget", json=budget).status_code == 200
    fn = code_function("held", project, CODE, "handler")
    uids = []
    for _ in range(count):
        made = api.post("/runs", json={"function": fn})
        assert made.status_code == 201, made.text
        assert made.json()["state"] == "pending", made.text  # held by the budget
        uids.append(str(made.json()["uid"]))
    return uids


def test_pages_of_runs_come_in_place_and_back_and_forward_show_them_again(
    page: Page, api: httpx.Client
) -> None:
    uids = held_runs(api, "paged", PAGE_SIZE + 3)
    newest_first = uids[::-1]
    rows = page.locator("#run-rows tr")
    count = page.locator("#runs-count")
    login(page)
    page.goto("/ui/projects/paged/jobs")
    expect(count).to_have_text(f"{PAGE_SIZE + 3} runs · page 1 of 2")
    expect(rows).to_have_count(PAGE_SIZE)
    mark(page)

    page.get_by_role("link", name="Next page").click()
    expect(count).to_have_text(f"{PAGE_SIZE + 3} runs · page 2 of 2")
    expect(rows).to_have_count(3)
    expect(rows.first).to_have_id(f"run-{newest_first[PAGE_SIZE]}")
    expect(page).to_have_url(re.compile(r"/ui/projects/paged/jobs\?.*after="))
    expect(count).to_be_in_viewport()  # the new page is shown from its top
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)

    newer = held_runs(api, "paged", 1)[0]  # while the second page is shown
    page.go_back()  # the first page read again whole, with the run submitted since
    expect(count).to_have_text(f"{PAGE_SIZE + 4} runs · page 1 of 2")
    expect(rows).to_have_count(PAGE_SIZE)
    expect(rows.first).to_have_id(f"run-{newer}")
    expect(page).to_have_url(re.compile(r"/ui/projects/paged/jobs$"))
    expect(page.get_by_role("heading", name=re.compile("^Jobs and Workflows"))).to_have_count(1)
    assert page.evaluate("sessionStorage.getItem('htmx-history-cache')") is None

    # Forward reads the second page again, and gets it whole: the heading and filters once,
    # the list once.
    page.go_forward()
    expect(count).to_have_text(f"{PAGE_SIZE + 4} runs · page 2 of 2")
    expect(page.get_by_role("heading", name=re.compile("^Jobs and Workflows"))).to_have_count(1)
    expect(page.get_by_label("State")).to_have_count(1)
    expect(page.locator("#runs")).to_have_count(1)
    expect(rows).to_have_count(3)  # after the cursor it was left at: the 51st to 53rd

    page.get_by_role("link", name="First page").click()
    expect(count).to_have_text(f"{PAGE_SIZE + 4} runs · page 1 of 2")
    expect(rows).to_have_count(PAGE_SIZE)
    assert not_reloaded(page)


def test_a_page_that_fails_to_come_leaves_the_list_as_it_was(page: Page, api: httpx.Client) -> None:
    """The old rows go only once a new list is to be swapped in: an error answer keeps them."""
    held_runs(api, "failing", PAGE_SIZE + 1)
    rows = page.locator("#run-rows tr")
    login(page)
    page.goto("/ui/projects/failing/jobs")
    expect(rows).to_have_count(PAGE_SIZE)
    page.route("**/ui/projects/failing/jobs?*after=*", lambda route: route.fulfill(status=500))
    page.evaluate(
        "document.body.addEventListener('htmx:responseError', () => { window.failed = true; },"
        " { once: true })"
    )
    page.get_by_role("link", name="Next page").click()
    page.wait_for_function("window.failed === true")
    expect(rows).to_have_count(PAGE_SIZE)
    expect(page.locator("#runs-count")).to_have_text(f"{PAGE_SIZE + 1} runs · page 1 of 2")


def test_a_history_read_of_the_runs_page_is_a_whole_page(page: Page) -> None:
    """What htmx sends for a Back or a Forward (it keeps no copy of a page), beside a swap."""
    login(page)
    url = "/ui/projects/default/jobs"
    swap = page.request.get(url, headers={"HX-Request": "true"})
    restore = page.request.get(
        url, headers={"HX-Request": "true", "HX-History-Restore-Request": "true"}
    )
    assert swap.status == restore.status == 200
    assert swap.text().lstrip().startswith('<section id="runs"')
    assert restore.text().lstrip().lower().startswith("<!doctype html>")
    assert restore.text().count('id="runs"') == 1

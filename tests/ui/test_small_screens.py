"""Every page on a phone and on a desktop: nothing scrolls sideways at 400 px, nor at 1280,
with a project, a run, a function and a schedule giving the pages content; the menu folds
into a Menu button on a small screen."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from .conftest import SHOTS, code_function, login, shot
from .test_charts import HOLDER

CODE = (
    "def train(context, epochs: int = 1, learning_rate: float = 0.1, label: str = 'x'):\n"
    "    print('training a model with a rather long line of output ' * 4)\n"
    "    return {'epochs': epochs, 'a_rather_long_result_name': 'with a long value ' * 3}\n"
)
PROJECT = "phone-sized-project"


@pytest.fixture(scope="module")
def content(service: str) -> Iterator[dict[str, str]]:
    """A project with a finished run, a job function, a serving function and a schedule."""
    from .conftest import ADMIN_TOKEN

    with httpx.Client(
        base_url=f"{service}/api/v1", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    ) as api:
        api.post(
            "/projects",
            json={
                "name": PROJECT,
                "description": "A project whose pages are read on a phone " * 3,
                "params": {"label_column": "churned", "a_long_parameter_name": "value " * 8},
            },
        )
        fn = code_function(
            "a-function-with-a-long-name",
            PROJECT,
            CODE,
            "train",
            resources={"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
            node_selector={"app.iguazio.com/lifecycle": "non-preemptible"},
        )
        assert api.post("/functions", json=fn).status_code == 201
        serving = {"kind": "serving", "metadata": {"name": "predictor", "project": PROJECT}}
        assert api.post("/functions", json=serving).status_code == 201
        run = api.post("/runs", json={"function": fn, "params": {"epochs": 3}}).json()
        deadline = time.monotonic() + 60
        while api.get(f"/runs/{run['uid']}").json()["state"] not in ("completed", "error"):
            assert time.monotonic() < deadline, "the run did not finish"
            time.sleep(0.1)
        # A run long enough to be sampled: its page draws memory and CPU over time.
        holder = code_function("holder", PROJECT, HOLDER, "hold", resources=fn["spec"]["resources"])
        assert api.post("/functions", json=holder).status_code == 201
        sampled = api.post("/runs", json={"function": holder}).json()
        while api.get(f"/runs/{sampled['uid']}").json()["state"] not in ("completed", "error"):
            assert time.monotonic() < deadline + 60, "the sampled run did not finish"
            time.sleep(0.1)
        schedule = {"function": fn, "schedule": "0 3 * * *", "params": {"epochs": 2}}
        assert api.post("/schedules", json=schedule).status_code == 201
        yield {"uid": run["uid"], "function": fn["metadata"]["name"], "sampled": sampled["uid"]}


def pages(uid: str, function: str, sampled: str) -> list[str]:
    base = f"/ui/projects/{PROJECT}"
    return [
        "/ui/",
        f"{base}/jobs",
        f"/ui/runs/{uid}",
        f"/ui/runs/{sampled}",
        f"{base}/functions/holder",
        f"/ui/runs/{uid}/logs",
        f"{base}/jobs/new",
        f"{base}/jobs/new?rerun={uid}",
        f"{base}/functions",
        f"{base}/functions/{function}",
        f"{base}/functions/{function}/edit",
        f"{base}/functions/predictor/deploy",
        f"{base}/serving/new",
        f"{base}/schedules",
        f"{base}/settings",
        "/ui/new-project",
        "/ui/settings",
        "/ui/cluster",
    ]


def overflow(page: Page) -> str:
    """What sticks out past the viewport's right edge, or '' where nothing does."""
    return str(
        page.evaluate(
            """() => {
              const doc = document.documentElement;
              if (doc.scrollWidth <= window.innerWidth) return '';
              const wide = [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                .filter(e => !(e.parentElement && e.parentElement.closest('.scroll-x')))
                .slice(0, 5)
                .map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' '
                          + Math.round(e.getBoundingClientRect().right));
              return `scrollWidth ${doc.scrollWidth} > innerWidth ${window.innerWidth}: `
                     + wide.join(', ');
            }"""
        )
    )


@pytest.mark.parametrize("width", [400, 1280])
def test_no_page_scrolls_sideways(page: Page, content: dict[str, str], width: int) -> None:
    page.set_viewport_size({"width": width, "height": 800})
    login(page)
    wide = {}
    for path in pages(content["uid"], content["function"], content["sampled"]):
        response = page.goto(path)
        assert response is not None, path
        assert response.status == 200, path
        page.wait_for_load_state("networkidle")
        if found := overflow(page):
            wide[path] = found
    assert not wide, "\n".join(f"{k}: {v}" for k, v in wide.items())
    page.goto("/ui/login")  # logged in, the login page still fits
    assert overflow(page) == ""


def test_the_menu_folds_on_a_small_screen(page: Page, content: dict[str, str]) -> None:
    page.set_viewport_size({"width": 400, "height": 800})
    login(page)
    page.goto(f"/ui/projects/{PROJECT}/jobs")
    menu = page.get_by_role("navigation", name="Main menu")
    toggle = page.get_by_role("button", name="Menu")
    expect(menu).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    menu.get_by_role("link", name="ML functions").click()
    expect(page).to_have_url(re.compile(r"/functions$"))
    page.set_viewport_size({"width": 1280, "height": 800})
    expect(menu).to_be_visible()
    expect(toggle).to_be_hidden()


@pytest.mark.parametrize("width", [400, 1280])
def test_screenshots_at_both_widths(page: Page, content: dict[str, str], width: int) -> None:
    page.set_viewport_size({"width": width, "height": 800})
    login(page)
    suffix = "phone" if width == 400 else "desktop"
    page.goto(f"/ui/runs/{content['uid']}")
    expect(page.get_by_text("completed").first).to_be_visible()
    shot(page, f"run-{suffix}", full_page=width == 400)
    page.goto(f"/ui/projects/{PROJECT}/jobs")
    shot(page, f"jobs-{suffix}")
    page.goto("/ui/cluster")
    expect(page.locator("#capacity svg.chart").first).to_be_visible()
    shot(page, f"cluster-{suffix}", full_page=width == 400)
    page.goto(f"/ui/runs/{content['sampled']}")
    usage = page.locator("#usage")
    expect(usage.locator("svg#usage-memory polyline.series")).to_have_count(1)
    usage.scroll_into_view_if_needed()
    usage.screenshot(path=str(SHOTS / f"usage-{suffix}.png"))

"""The web UI in a real browser: Debian's Chromium driven by Playwright, against a real
``runplane serve`` whose runs execute on this machine.

Chromium comes from the distribution (``scripts/ui-deps.sh``), never from Playwright's own
download; without it these tests fail, saying how to install it. Screenshots of each page are
written to ``docs/ui/`` (shown in docs/ui.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from testbed import serve

ADMIN_TOKEN = "ui-admin-token-for-the-tests"
USER_TOKEN = "ui-user-token-for-the-tests"
TOKENS = (
    f'[{{"token": "{ADMIN_TOKEN}", "user": "alice", "role": "admin"}},'
    f' {{"token": "{USER_TOKEN}", "user": "bob", "role": "user"}}]'
)
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "ui"


def chromium() -> str:
    found = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium")
    if not found or not Path(found).exists():
        pytest.fail(
            "Debian's chromium is not installed, so the web UI cannot be tested: run "
            "`bash scripts/ui-deps.sh` (apt-get install chromium) or set CHROMIUM_PATH",
            pytrace=False,
        )
    return found


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    # The distribution's Chromium, not Playwright's download (unreachable here and in CI).
    return {**browser_type_launch_args, "executable_path": chromium()}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "viewport": {"width": 1280, "height": 860}}


@pytest.fixture(scope="session")
def volume_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the PVC ``data-claim`` is on this machine."""
    return tmp_path_factory.mktemp("data-claim")


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory, volume_dir: Path) -> Iterator[str]:
    home = tmp_path_factory.mktemp("ui-service")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env.update(
        {
            "RUNPLANE_CONFIG": os.devnull,
            "RUNPLANE_LOCAL__HOME": str(home / "home"),
            "RUNPLANE_LOCAL__CPU": "2",
            "RUNPLANE_LOCAL__MEMORY": "4Gi",
            "RUNPLANE_LOCAL__GPUS": "0",
            "RUNPLANE_LOCAL__INHERIT_ENV": '["COVERAGE_PROCESS_CONFIG", "COVERAGE_FILE"]',
            "RUNPLANE_LOCAL__VOLUMES": f'{{"data-claim": {{"path": "{volume_dir}"}}}}',
            "RUNPLANE_SERVICE__TOKENS": TOKENS,
            "RUNPLANE_SERVICE__SCHEDULE_INTERVAL": "0.5",
            "RUNPLANE_PRIORITY_CLASSES__ALLOWED_ROLES": '{"high": ["admin"]}',
        }
    )
    process, url = serve.start_service(env, home / "service.log")
    yield url
    # A deployment outlives the service that made it (its supervisor runs in a session of its
    # own, as on a machine it must): the tests' deployments are deleted with the service.
    with admin_api(url) as client:
        for deployment in client.get("/deployments").raise_for_status().json():
            where = f"/deployments/{deployment['project']}/{deployment['name']}"
            client.delete(where, timeout=60).raise_for_status()
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture(scope="session")
def base_url(service: str) -> str:
    return service


def admin_api(service: str) -> httpx.Client:
    """The service's API, as alice (admin)."""
    return httpx.Client(
        base_url=f"{service}/api/v1", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )


@pytest.fixture
def api(service: str) -> Iterator[httpx.Client]:
    """The same service's API, as alice (admin)."""
    with admin_api(service) as client:
        yield client


def login(page: Page, token: str = ADMIN_TOKEN) -> None:
    """Log in as a user does: the token in the login form, sent with Log in."""
    page.goto("/ui/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".who")).to_be_visible()


def shot(page: Page, name: str, full_page: bool = False) -> None:
    """A screenshot for docs/ui.md."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def code_function(name: str, project: str, code: str, handler: str, **spec: Any) -> dict[str, Any]:
    """A job function with embedded code, as ``fn.to_dict()`` makes it."""
    import base64

    return {
        "kind": "job",
        "metadata": {"name": name, "project": project},
        "spec": {
            "handler": handler,
            "build": {"source": base64.b64encode(code.encode()).decode(), "filename": f"{name}.py"},
            **spec,
        },
    }

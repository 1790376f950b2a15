"""Login with a token, the session cookie it sets, CSRF on forms, logout."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from testbed import serve

from .conftest import ADMIN_TOKEN, login, shot


def at(path: str) -> re.Pattern[str]:
    return re.compile(re.escape(path) + "$")


def test_token_login_sets_a_strict_http_only_cookie_and_logout_ends_it(page: Page) -> None:
    page.goto("/ui/projects/default/jobs")
    expect(page).to_have_url(at("/ui/login?next=%2Fui%2Fprojects%2Fdefault%2Fjobs"))
    shot(page, "login")
    page.get_by_label("Token").fill("not-a-token-at-all")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("That token is not valid.")
    page.get_by_label("Token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Jobs and Workflows")).to_be_visible()
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "runplane_session"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/ui"
    assert ADMIN_TOKEN not in cookie["value"]
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_label("Token")).to_be_visible()
    page.goto("/ui/")
    expect(page).to_have_url(at("/ui/login?next=%2Fui%2F"))


def test_login_link_logs_in_and_leaves_no_token_in_the_address(page: Page) -> None:
    page.goto(f"/ui/login#token={ADMIN_TOKEN}")
    expect(page).to_have_url(at("/ui/login"))  # the token is taken out of the address
    expect(page.get_by_label("Token")).to_have_value(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(at("/ui/"))
    expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()
    shot(page, "projects")


def test_a_link_from_another_site_logs_nobody_in(page: Page, service: str) -> None:
    """A cross-site ``GET /ui/login?token=ATTACKER`` once logged the visitor in as the
    attacker: now a GET never logs in, and a login form sent from elsewhere is refused."""
    page.goto(f"/ui/login?token={ADMIN_TOKEN}")
    expect(page.get_by_label("Token")).to_have_value("")
    assert not [c for c in page.context.cookies() if c["name"] == "runplane_session"]
    page.goto("/ui/")
    expect(page).to_have_url(at("/ui/login?next=%2Fui%2F"))
    # A form posted from another site's page: refused before its token is looked at, and
    # without the login form's own cookie (SameSite=Strict) it would be refused anyway.
    with httpx.Client(base_url=service) as client:
        form = client.get("/ui/login")
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
        assert nonce is not None
        for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            forged = client.post(
                "/ui/login",
                data={"nonce": nonce[1], "token": ADMIN_TOKEN, "next": "/ui/"},
                headers=headers,
            )
            assert forged.status_code == 403
            assert "runplane_session" not in forged.cookies


def test_state_changing_forms_need_the_session_csrf_token(page: Page, service: str) -> None:
    login(page)
    session = next(c for c in page.context.cookies() if c["name"] == "runplane_session")
    cookies = {"runplane_session": session["value"]}
    # The session cookie alone (what a forged cross-site form would carry) is refused.
    forged = httpx.post(f"{service}/ui/settings", cookies=cookies, data={"cpu_request": "1"})
    assert forged.status_code == 403
    assert "security token" in forged.text
    logout = httpx.post(f"{service}/ui/logout", cookies=cookies)
    assert logout.status_code == 403
    # Another site's origin is refused even with the token.
    csrf = page.locator("body").get_attribute("data-csrf")
    elsewhere = httpx.post(
        f"{service}/ui/logout",
        cookies=cookies,
        data={"csrf": csrf},
        headers={"Origin": "https://evil.example"},
    )
    assert elsewhere.status_code == 403
    # The page itself still works: the session was not ended by the refused requests.
    page.reload()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def test_after_login_the_next_page_is_only_ever_this_ui(page: Page) -> None:
    page.goto("/ui/login?next=//evil.example/ui/")
    page.get_by_label("Token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(at("/ui/"))


def test_runplane_ui_prints_a_login_link_and_stops_with_pages_open(
    page: Page, tmp_path: Path
) -> None:
    """`runplane ui`: the service on 127.0.0.1, a link with this start's token; a page
    following runs live does not hold up the stop."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env.update({"RUNPLANE_CONFIG": os.devnull, "RUNPLANE_LOCAL__HOME": str(tmp_path / "home")})
    env.pop("DISPLAY", None)
    port = serve.free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "runplane", "ui", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stderr is not None
        link = ""
        for line in process.stderr:
            if "/ui/login#token=" in line:
                link = line.strip()
                break
        assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/ui/login#token=[\w-]{{43}}", link)
        page.goto(link)
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()
        expect(page.locator(".who")).to_contain_text("(admin)")
        token = link.rsplit("=", 1)[1]
        health = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/runs", headers={"Authorization": f"Bearer {token}"}
        )
        assert health.status_code == 200  # the same token is the API's
        with page.expect_response(re.compile("/jobs/live")):
            page.goto(f"http://127.0.0.1:{port}/ui/projects/default/jobs")
        process.send_signal(signal.SIGTERM)
        # uvicorn re-raises SIGTERM once it has shut down gracefully.
        assert process.wait(timeout=10) in (0, -signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

"""What every page shares: the server, sessions, templates, and the checks before a handler.

A page handler asks for :func:`UI.session` (a logged-in user, else the login page) and, for a
form that changes something, :meth:`UI.form` (the form, its CSRF token checked). Handlers call
the same :class:`~runplane.service.server.Server` the API calls; rules live there, not here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import version
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.datastructures import FormData

from runplane.service.auth import Tokens
from runplane.service.server import Server
from runplane.service.throttle import FailureThrottle
from runplane.ui import present
from runplane.ui.sessions import SESSION_COOKIE, Session, Sessions, same_token

#: Where the pages live under the service.
ROOT = "/ui"


class LoginRequired(Exception):
    """No valid session: the login page, then back to where the user was going."""


class CsrfRefused(Exception):
    """A state-changing request without this session's CSRF token, or from another site."""


def _environment() -> Environment:
    # The templates are the package's own and do not change while it runs: a template is
    # read once, not looked up on disk again at each use (the runs list includes its row's
    # template once per row).
    env = Environment(
        loader=PackageLoader("runplane.ui", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.filters.update(present.FILTERS)
    env.globals["ROOT"] = ROOT
    env.globals["VERSION"] = version("runplane")
    return env


@dataclass
class UI:
    server: Server
    #: The service's tokens and who holds each (the API's own table).
    tokens: Tokens
    #: True once the service is shutting down: live streams end so it can stop.
    stopping: Callable[[], bool] = lambda: False
    sessions: Sessions = field(default_factory=Sessions)
    #: Wrong tokens per client address (the API's own throttle).
    throttle: FailureThrottle = field(default_factory=lambda: FailureThrottle(1.0, 20))
    templates: Jinja2Templates = field(default_factory=lambda: Jinja2Templates(env=_environment()))

    def session(self, request: Request) -> Session:
        """The logged-in session of ``request`` (a FastAPI dependency)."""
        session = self.sessions.get(request.cookies.get(SESSION_COOKIE))
        if session is None:
            raise LoginRequired
        return session

    async def form(self, request: Request, session: Session) -> FormData:
        """The submitted form, once its CSRF token and origin are checked."""
        if cross_site(request):
            raise CsrfRefused
        form = await request.form()
        offered = form.get("csrf") or request.headers.get("x-csrf-token")
        if not same_token(session.csrf, offered):
            raise CsrfRefused
        return form

    def page(
        self,
        request: Request,
        template: str,
        session: Session | None,
        context: Mapping[str, Any] | None = None,
        status_code: int = 200,
    ) -> HTMLResponse:
        """A template rendered with what every page needs: the user, the CSRF token and the
        projects of the left menu pane (read only if the template shows the menu: a part of
        a page, swapped in, does not)."""
        values: dict[str, Any] = {"who": None, "csrf": "", "projects": [], "project": None}
        if session is not None:
            values.update(who=session.who, csrf=session.csrf, projects=_Menu(self.projects))
        values.update(context or {})
        response = self.templates.TemplateResponse(
            request, template, values, status_code=status_code
        )
        return response

    def projects(self) -> list[str]:
        """The left menu's projects: every recorded one and every one with runs, functions
        or schedules (``default`` always)."""
        return sorted({"default", *self.server.projects.names()})


class _Menu:
    """The left menu's projects, read at the first look and kept for the rest of the page."""

    def __init__(self, read: Callable[[], list[str]]) -> None:
        self._read = read

    @cached_property
    def _names(self) -> list[str]:
        return self._read()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)


def cross_site(request: Request) -> bool:
    """Whether ``request`` was sent by another site's page, by what the browser says of it."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        return True
    return request.headers.get("sec-fetch-site") == "cross-site"


def in_page(request: Request) -> bool:
    """Whether ``request`` asks for a part of the page it was sent from (htmx swaps it in),
    not a whole page. A browser's Back to a page htmx left out of its history cache asks for
    the page again as htmx, but swaps the whole answer in for the page: that one is a whole
    page."""
    headers = request.headers
    return "hx-request" in headers and "hx-history-restore-request" not in headers


def login_url(request: Request) -> str:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"{ROOT}/login?next={quote(target, safe='')}"


def safe_next(target: str | None) -> str:
    """Where to go after login: a page of this UI only, never another site."""
    if (
        target
        and target.startswith(f"{ROOT}/")
        and not any(part in target for part in ("\\", "/..", "//", "\n", "\r"))
    ):
        return target
    return f"{ROOT}/"

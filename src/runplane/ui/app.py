"""The web UI as an application mounted into the service's own, at ``/ui``.

It shares the process, the tokens and the :class:`~runplane.service.server.Server` with the
API, so a page and an API call see the same runs and obey the same rules. Pages are rendered
on the server (Jinja2) and work without JavaScript for reading; htmx, shipped in the package,
and a small script of ours enhance them (filters, checks as you type, live updates).
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import cookie_parser

from runplane.errors import RunplaneError
from runplane.service.guard import Door, Doors, Headers
from runplane.service.outage import RETRY_AFTER, outage
from runplane.service.proxies import client_address
from runplane.service.server import Server
from runplane.service.throttle import FailureThrottle, retry_after
from runplane.ui import live
from runplane.ui.invalid import invalid_request_page
from runplane.ui.pages import admin, budgets, functions, newjob, projects, quotas, runs, serving
from runplane.ui.sessions import LOGIN_COOKIE, SESSION_COOKIE, Session, Sessions, same_token
from runplane.ui.web import (
    ROOT,
    UI,
    CsrfRefused,
    LoginRequired,
    cross_site,
    in_page,
    login_url,
    safe_next,
)

#: No inline scripts or styles, nothing from elsewhere; pages never framed.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
#: The login form's largest body: a token, the form's nonce and where to go next.
LOGIN_BYTES = 4096


def create_ui(
    server: Server,
    stopping: Callable[[], bool] = lambda: False,
    throttle: FailureThrottle | None = None,
) -> FastAPI:
    service = server.base_settings.service
    ui = UI(
        server,
        server.tokens,
        stopping,
        Sessions(service.sessions_per_user),
        throttle=throttle
        or FailureThrottle(service.auth_failures_per_second, service.auth_failure_burst),
    )
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.state.ui = ui
    app.mount("/static", StaticFiles(packages=[("runplane.ui", "static")]), name="static")

    @app.middleware("http")
    async def headers(request: Request, call_next: Callable[..., object]) -> Response:
        response: Response = await call_next(request)  # type: ignore[misc]
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("X-Frame-Options", "DENY")
        # The login URL carries a token: no page ever tells another site where it came from.
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        if request.url.path.startswith(f"{ROOT}/static/"):
            # Their URLs carry runplane's version, so a cached copy is never a stale one.
            response.headers.setdefault("Cache-Control", "public, max-age=86400")
        else:
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, _: LoginRequired) -> Response:
        if request.method == "GET" and not in_page(request):
            return RedirectResponse(login_url(request), status_code=303)
        response = ui.page(
            request,
            "message.html",
            None,
            {"title": "Logged out", "message": "Your session has ended; log in again."},
            status_code=401,
        )
        response.headers["HX-Redirect"] = f"{ROOT}/login"
        return response

    @app.exception_handler(CsrfRefused)
    async def csrf_refused(request: Request, _: CsrfRefused) -> Response:
        message = (
            "This form was refused: it did not carry this session's security token or came "
            "from another site. Reload the page and try again."
        )
        return ui.page(request, "message.html", None, {"title": "Refused", "message": message}, 403)

    @app.exception_handler(RunplaneError)
    async def runplane_error(request: Request, error: RunplaneError) -> Response:
        session = ui.sessions.get(request.cookies.get(SESSION_COOKIE))
        context = {
            "title": "Refused" if error.http_status == 403 else "Error",
            "message": str(error),
        }
        return ui.page(request, "message.html", session, context, error.http_status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        session = ui.sessions.get(request.cookies.get(SESSION_COOKIE))
        context = {"title": "Error", "message": str(error.detail)}
        return ui.page(request, "message.html", session, context, error.status_code)

    @app.exception_handler(DBAPIError)
    @app.exception_handler(OSError)
    async def storage_error(request: Request, error: Exception) -> Response:
        reason = outage(error)  # a full disk, a database busy or unreachable: it passes
        if reason is None:
            raise error
        message = f"runplane cannot do this now: {reason}. Try again in a moment."
        context = {"title": "Unavailable", "message": message}
        response = ui.page(request, "message.html", None, context, 503)
        response.headers["Retry-After"] = str(RETRY_AFTER)
        return response

    app.add_exception_handler(RequestValidationError, invalid_request_page(ui))
    _auth_routes(app, ui)
    for module in (runs, live, newjob, functions, serving, projects, quotas, budgets, admin):
        app.include_router(module.router(ui))
    return app


def _auth_routes(app: FastAPI, ui: UI) -> None:
    import secrets

    LoggedIn = Annotated[Session, Depends(ui.session)]

    def login_page(
        request: Request, next_page: str, error: str = "", status_code: int = 200
    ) -> HTMLResponse:
        nonce = secrets.token_urlsafe(32)
        response = ui.page(
            request,
            "login.html",
            None,
            {"nonce": nonce, "next": safe_next(next_page), "error": error},
            status_code,
        )
        response.set_cookie(
            LOGIN_COOKIE, nonce, httponly=True, samesite="strict", path=ROOT, secure=_https(request)
        )
        return response

    def logged_in(request: Request, session: Session, target: str) -> RedirectResponse:
        response = RedirectResponse(safe_next(target), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            session.id,
            httponly=True,
            samesite="strict",
            path=ROOT,
            secure=_https(request),
        )
        response.delete_cookie(LOGIN_COOKIE, path=ROOT)
        return response

    @app.get("/login", response_class=HTMLResponse)
    def login(request: Request, next: str = "", token: str = "") -> Response:
        """The login page. It never logs in by itself (a link from another site could log the
        visitor in as somebody else): the form is sent by POST, by the user."""
        if token:  # an old link: the token is not used from the address
            return login_page(request, next, "Enter the token in the field and press Log in.")
        return login_page(request, next)

    @app.post("/login")
    async def submit_login(request: Request) -> Response:
        address = client_address(request.scope)
        if cross_site(request):
            return login_page(request, "", "The login form came from another site.", 403)
        wait = ui.throttle.wait(address)
        if wait > 0:
            response = login_page(
                request,
                "",
                f"Too many wrong tokens from this address; try again in {retry_after(wait)} s.",
                429,
            )
            response.headers["Retry-After"] = retry_after(wait)
            return response
        form = await request.form()
        target = str(form.get("next") or "")
        if not same_token(request.cookies.get(LOGIN_COOKIE, ""), form.get("nonce")) or not (
            request.cookies.get(LOGIN_COOKIE)
        ):
            return login_page(request, target, "The login form expired; try again.", 403)
        who = ui.tokens.holder(str(form.get("token") or "").encode())
        if who is None:
            ui.throttle.failed(address)
            return login_page(request, target, "That token is not valid.", 401)
        return logged_in(request, ui.sessions.login(who), target)

    @app.post("/logout")
    async def logout(request: Request, session: LoggedIn) -> Response:
        await ui.form(request, session)
        ui.sessions.logout(session.id)
        response = RedirectResponse(f"{ROOT}/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=ROOT)
        return response


def _https(request: Request) -> bool:
    return request.url.scheme == "https"


def mount(app: FastAPI, server: Server, stopping: Callable[[], bool] = lambda: False) -> None:
    """Serve the UI from ``app`` (the service's API application) at ``/ui``; ``/`` leads
    there.

    The UI's doors join the service's (:mod:`runplane.service.guard`): anyone may send the
    login form, a few KiB at most; any other page's body is read only with a session, up to
    ``service.max_request_bytes``, and without one the page answers unread (to the login
    page). Wrong tokens on the login form count against the API's throttle.
    """
    doors: Doors | None = getattr(app.state, "doors", None)
    if doors is None:
        raise TypeError(
            "the web UI is mounted on the service's app (runplane.service.api.create_app), "
            "whose gate bounds and authenticates the pages' bodies"
        )
    pages = create_ui(server, stopping, app.state.throttle)
    sessions = pages.state.ui.sessions

    def session_of(headers: Headers) -> Session | None:
        cookies = cookie_parser(headers.get(b"cookie", b"").decode("latin-1"))
        return sessions.get(cookies.get(SESSION_COOKIE))  # type: ignore[no-any-return]

    doors.add(Door(f"{ROOT}/login", LOGIN_BYTES))
    doors.add(
        Door(
            f"{ROOT}/",
            server.base_settings.service.max_request_bytes,
            who=session_of,
            anonymous="unread",
            setting="service.max_request_bytes",
        )
    )
    app.mount(ROOT, pages)

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse(f"{ROOT}/", status_code=307)

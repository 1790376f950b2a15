"""The API's interactive pages, ``/docs`` (Swagger UI) and ``/redoc``, when
``service.api_docs`` asks for them.

They run scripts from a CDN on the service's own origin, beside the web UI's session cookie,
so they are off by default. When on, the scripts are pinned to one version each and the pages
carry a Content-Security-Policy that lets exactly those files and the page's own inline start
script (by its hash) run, nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import re

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

_CDN = "https://cdn.jsdelivr.net/npm"
SWAGGER_JS = f"{_CDN}/swagger-ui-dist@5.17.14/swagger-ui-bundle.js"
SWAGGER_CSS = f"{_CDN}/swagger-ui-dist@5.17.14/swagger-ui.css"
REDOC_JS = f"{_CDN}/redoc@2.1.5/bundles/redoc.standalone.js"
_INLINE = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def serve_docs(app: FastAPI) -> None:
    """Add ``/docs`` and ``/redoc`` to ``app``, each with its policy."""
    openapi = app.openapi_url or "/openapi.json"
    swagger = _with_policy(
        get_swagger_ui_html(
            openapi_url=openapi,
            title=f"{app.title} API",
            swagger_js_url=SWAGGER_JS,
            swagger_css_url=SWAGGER_CSS,
            swagger_favicon_url="data:,",
        ),
        scripts=[SWAGGER_JS],
        styles=[SWAGGER_CSS],
    )
    redoc = _with_policy(
        get_redoc_html(
            openapi_url=openapi,
            title=f"{app.title} API",
            redoc_js_url=REDOC_JS,
            redoc_favicon_url="data:,",
            with_google_fonts=False,
        ),
        scripts=[REDOC_JS],
        styles=[],
    )

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return swagger

    @app.get("/redoc", include_in_schema=False)
    def redoc_page() -> HTMLResponse:
        return redoc


def _with_policy(page: HTMLResponse, scripts: list[str], styles: list[str]) -> HTMLResponse:
    html = bytes(page.body).decode()
    inline = [_hash(code) for code in _INLINE.findall(html)]
    # The renderers add styles as they draw (a hash here would turn 'unsafe-inline' off).
    policy = (
        f"default-src 'none'; script-src {' '.join([*scripts, *inline])}; "
        f"style-src {' '.join(styles)} 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src blob:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
    return HTMLResponse(
        html,
        headers={
            "Content-Security-Policy": policy,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        },
    )


def _hash(code: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"

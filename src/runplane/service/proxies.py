"""Who is calling: the client's address, read through the reverse proxies this service trusts.

Behind an Ingress, a load balancer or any reverse proxy, every connection comes from the
proxy; what is kept per client address (the failed-authentication throttle,
:mod:`runplane.service.throttle`) would then be kept for everyone at once, and one guesser
would lock every user out. With ``service.trusted_proxies`` (addresses and CIDR networks), a
request whose peer is one of them is taken to come from the right-most ``X-Forwarded-For``
address that is not itself trusted: each proxy appends the address it was reached from, so
that one was written by a proxy of ours, while anything left of it may be the caller's own
invention. From any other peer the header is ignored, so a caller cannot name itself to
escape the throttle. ``X-Forwarded-Proto`` from a trusted proxy becomes the request's scheme
(the login cookie is ``Secure`` behind a proxy that terminates TLS).

The parsing is uvicorn's :class:`~uvicorn.middleware.proxy_headers.ProxyHeadersMiddleware`
(CIDR networks since uvicorn 0.31, repeated headers joined since 0.49), placed outside every
other middleware so the ASGI scope's ``client`` is the resolved address for all of them;
:func:`client_address` is how the service reads it, wherever it keys anything by address.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import Scope
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware


def trust_proxies(app: FastAPI, trusted: list[str]) -> None:
    """Resolve every request's client address through ``trusted`` (checked networks, as
    :class:`runplane.config.Service` holds them; empty: the peer, headers ignored, so no
    middleware is needed). Added last, so it runs first."""
    if trusted:
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(trusted))


def client_address(scope: Scope) -> str | None:
    """The address a request came from, as resolved by :func:`trust_proxies`."""
    client = scope.get("client")
    return str(client[0]) if client else None

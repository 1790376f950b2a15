"""``/defaults``: the function defaults and the policies in force; read by every user,
changed by admins."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from runplane.service.defaults import policies_view
from runplane.service.routes.context import Admin, Service, User
from runplane.service.routes.submissions import MAX_FUNCTION_BYTES
from runplane.service.server import Server
from runplane.spec.bounds import check_json

router = APIRouter()


def _defaults_out(server: Server) -> dict[str, Any]:
    settings = server.settings
    return {
        **settings.function_defaults.model_dump(mode="json"),
        "policies": policies_view(settings),
    }


@router.get("/defaults")
def get_defaults(server: Service, _: User) -> dict[str, Any]:
    """The function defaults, and under ``policies`` the policies in force."""
    return _defaults_out(server)


@router.patch("/defaults")
def change_defaults(body: dict[str, Any], server: Service, who: Admin) -> dict[str, Any]:
    """Merge ``body`` into the defaults (``null`` removes a key, back to the configured
    value); refused whole if the result would not render a function."""
    check_json("defaults", body, MAX_FUNCTION_BYTES, "{'priority_class': 'low'}")
    server.update_defaults(body, who.user)
    return _defaults_out(server)

"""What a caller may touch: one rule for the API and the web pages.

Users see and act on their own runs and schedules; admins on everyone's, and only admins
change service defaults. Who the caller is comes from :mod:`runplane.service.auth`.
"""

from __future__ import annotations

from runplane.config import Settings
from runplane.errors import PolicyError, RunplaneError
from runplane.rendering.policy import check_priority_class
from runplane.service.auth import Principal


def check_owner(who: Principal, owner: str, what: str) -> None:
    """Users see and act on their own runs and schedules; admins on everyone's."""
    if not who.admin and owner != who.user:
        raise PolicyError(
            what, f"belongs to another user; user {who.user!r} sees and acts on their own only"
        )


def admin_only(who: Principal) -> str:
    """Why ``who`` may not change service defaults (said to users, who may only read them)."""
    return f"user {who.user!r} may not change service defaults; only admins may"


def usable_priority_classes(settings: Settings, role: str) -> list[str]:
    """The priority classes ``role`` may give a function, by the rendering policy itself."""
    usable = []
    for name in settings.priority_classes.valid:
        try:
            check_priority_class(settings, name, role)
        except RunplaneError:
            continue
        usable.append(name)
    return usable

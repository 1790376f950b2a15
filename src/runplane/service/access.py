"""Who is calling and what they may touch: one rule for the API and the web pages.

A token names a user and a role. Users see and act on their own runs and schedules; admins on
everyone's, and only admins change service defaults.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from typing import Literal

from runplane.config import Settings
from runplane.errors import PolicyError, RunplaneError
from runplane.rendering.policy import check_priority_class


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    user: str
    role: Literal["admin", "user"]

    @property
    def admin(self) -> bool:
        return self.role == "admin"

    def owner_filter(self) -> str | None:
        """Whose runs and schedules a listing shows: everyone's to an admin."""
        return None if self.admin else self.user


def identify(tokens: Sequence[tuple[bytes, Principal]], offered: str) -> Principal | None:
    """Who holds ``offered``. Every known token is compared, in constant time, so how long
    the check takes says nothing about which token came close."""
    raw = offered.encode()
    found: Principal | None = None
    for known, who in tokens:
        if secrets.compare_digest(known, raw) and raw:
            found = who
    return found


def token_table(settings: Settings) -> list[tuple[bytes, Principal]]:
    return [
        (t.token.get_secret_value().encode(), Principal(t.user, t.role))
        for t in settings.service.tokens
    ]


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

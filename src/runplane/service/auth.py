"""Who calls the API: bearer tokens, the users they name, their roles and secret grants.

Resolved from the request's headers alone, at the app's boundary (see
:mod:`runplane.service.guard`), so a caller without a valid token is refused before anything
reads their body.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Literal

from runplane.config import Token
from runplane.errors import PolicyError
from runplane.spec.secret_refs import secret_references

if TYPE_CHECKING:
    from runplane.spec.function import Function

#: What an admin's token grants when its entry lists no ``secrets``: every Secret.
ALL_SECRETS = ("*",)


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller: their user name, role, and the Secrets their runs may reference (globs)."""

    user: str
    role: Literal["admin", "user"]
    secrets: tuple[str, ...] = ()

    @property
    def admin(self) -> bool:
        return self.role == "admin"

    def may_use_secret(self, name: str) -> bool:
        return any(fnmatchcase(name, pattern) for pattern in self.secrets)

    def owner_filter(self) -> str | None:
        """Whose runs and schedules a listing shows: everyone's to an admin."""
        return None if self.admin else self.user


def principal_of(token: Token) -> Principal:
    """The caller a configured token names; users get no Secret unless their entry lists
    some, admins every Secret unless theirs lists fewer."""
    if token.secrets is not None:
        granted = tuple(token.secrets)
    else:
        granted = ALL_SECRETS if token.role == "admin" else ()
    return Principal(token.user, token.role, granted)


class Tokens:
    """The configured tokens, compared in constant time."""

    def __init__(self, tokens: Iterable[Token]) -> None:
        self._known = [(t.token.get_secret_value().encode(), principal_of(t)) for t in tokens]

    def who(self, authorization: bytes | None) -> Principal | None:
        """The caller an ``Authorization: Bearer <token>`` header names, or ``None``. Every
        known token is compared, so how long the check takes says nothing about which token
        came close."""
        scheme, _, offered = (authorization or b"").partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        return self.holder(offered.strip())

    def holder(self, offered: bytes) -> Principal | None:
        """Who holds the token ``offered`` (as typed on the web UI's login page, say)."""
        if not offered:
            return None
        found: Principal | None = None
        for known, who in self._known:
            if secrets.compare_digest(known, offered):
                found = who
        return found

    def of_user(self, user: str, role: str) -> Principal:
        """``user`` as their tokens grant now (several tokens: what any of them grants), for
        what runs in their name without a request (a schedule's runs). A user who holds no
        token any more is granted no Secret."""
        held = [who for _, who in self._known if who.user == user]
        granted = tuple(dict.fromkeys(glob for who in held for glob in who.secrets))
        return Principal(user, "admin" if role == "admin" else "user", granted)


def check_secret_grant(fn: Function, who: Principal) -> None:
    """Refuse ``fn`` if it references a Secret ``who`` may not use: the field and the Secret
    are named, and what the caller's token does grant."""
    for field, name in secret_references(fn):
        if not who.may_use_secret(name):
            granted = ", ".join(who.secrets) or "none"
            raise PolicyError(
                field,
                f"Secret {name!r} is not granted to user {who.user!r} (their token's secrets: "
                f"{granted}); an admin grants Secrets with the secrets list of a token in "
                "service.tokens",
            )

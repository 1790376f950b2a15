"""Browser sessions: a token exchanged once for an HttpOnly, SameSite=Strict cookie.

The cookie holds a random session id only; who it is and the session's CSRF token stay in this
process. Sessions end at logout, after a day without use, when the service restarts (log in
again with the token), or when the same user logs in more than ``service.sessions_per_user``
times (their least recently used session ends): one user's logins never end another's
sessions, and the table holds at most that many per user. Every state-changing form carries the
session's CSRF token, compared in constant time, and a request whose ``Origin`` is another
site is refused outright.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from runplane.service.auth import Principal

SESSION_COOKIE = "runplane_session"
#: The login form's own CSRF token (double submit: cookie and field must agree).
LOGIN_COOKIE = "runplane_login"
#: A session unused this long is gone.
IDLE_SECONDS = 24 * 3600


@dataclass(slots=True)
class Session:
    id: str
    who: Principal
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_seen: float = field(default_factory=time.monotonic)


class Sessions:
    def __init__(self, per_user: int = 20) -> None:
        self.per_user = per_user
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        #: Each user's session ids, least recently used first.
        self._of_user: dict[str, OrderedDict[str, None]] = {}

    def login(self, who: Principal) -> Session:
        session = Session(secrets.token_urlsafe(32), who)
        with self._lock:
            self._sessions[session.id] = session
            held = self._of_user.setdefault(who.user, OrderedDict())
            held[session.id] = None
            while len(held) > self.per_user:
                oldest, _ = held.popitem(last=False)
                del self._sessions[oldest]
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.last_seen > IDLE_SECONDS:
                self._drop(session)
                return None
            session.last_seen = now
            self._of_user[session.who.user].move_to_end(session_id)
            return session

    def logout(self, session_id: str | None) -> None:
        with self._lock:
            session = self._sessions.get(session_id or "")
            if session is not None:
                self._drop(session)

    def __len__(self) -> int:
        return len(self._sessions)

    def _drop(self, session: Session) -> None:
        del self._sessions[session.id]
        held = self._of_user[session.who.user]
        del held[session.id]
        if not held:
            del self._of_user[session.who.user]


def same_token(expected: str, offered: object) -> bool:
    return isinstance(offered, str) and secrets.compare_digest(expected.encode(), offered.encode())

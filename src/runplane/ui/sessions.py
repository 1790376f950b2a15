"""Browser sessions: a token exchanged once for an HttpOnly, SameSite=Strict cookie.

The cookie holds a random session id only; who it is and the session's CSRF token stay in this
process. Sessions end at logout, after a day without use, or when the service restarts (log in
again with the token). Every state-changing form carries the session's CSRF token, compared in
constant time, and a request whose ``Origin`` is another site is refused outright.
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
#: The most sessions kept; the least recently used go first (only valid tokens make one).
MAX_SESSIONS = 10_000


@dataclass(slots=True)
class Session:
    id: str
    who: Principal
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_seen: float = field(default_factory=time.monotonic)


class Sessions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def login(self, who: Principal) -> Session:
        session = Session(secrets.token_urlsafe(32), who)
        with self._lock:
            self._sessions[session.id] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
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
                del self._sessions[session_id]
                return None
            session.last_seen = now
            self._sessions.move_to_end(session_id)
            return session

    def holds(self, session: Session) -> bool:
        """Whether ``session`` is still logged in: a live stream asks, without counting as use."""
        with self._lock:
            live = self._sessions.get(session.id) is session
            return live and time.monotonic() - session.last_seen <= IDLE_SECONDS

    def logout(self, session_id: str | None) -> None:
        with self._lock:
            self._sessions.pop(session_id or "", None)


def same_token(expected: str, offered: object) -> bool:
    return isinstance(offered, str) and secrets.compare_digest(expected.encode(), offered.encode())

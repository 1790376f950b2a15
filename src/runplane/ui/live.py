"""Live pages: server-sent events driven by the service's own run feed.

A stream wakes when the recorder writes a change (:class:`~runplane.service.feed.RunFeed`) and
then reads only the runs that changed, once per burst: nothing queries the database on a
timer. A run's output is read once for all the streams that follow it
(:class:`~runplane.service.streams.LogFollowers`), from the byte offset the browser has (the
event id, so a reconnecting browser resumes where it was). Streams are few and cheap
(:class:`~runplane.service.streams.StreamSlots`: a 429 beyond ``service.live_streams``, and
their reads on threads of their own, never the request workers'). A stream ends when the
service shuts down, so open pages never hold up a restart, and when its session ends
(logout, expiry), within a second.

Every field of an event is written so that nothing in its text (a carriage return in a run's
error, say) can end the field or start another: data is split at each line end the
server-sent events format knows (CR, LF, CRLF), one ``data:`` line per line.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import asyncio
import codecs
import json
import re
import time
from collections.abc import AsyncGenerator, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from runplane.runs import RunRecord, RunState
from runplane.service.streams import LogFollower, LogFollowers, Slot, StreamSlots, StreamsRefused
from runplane.spec.numbers import whole_number
from runplane.ui.pages.runs import RunFilters, filter_of, run_charts, visible_run
from runplane.ui.sessions import Session
from runplane.ui.web import UI

#: How long a stream waits for a change before it checks for shutdown and its session.
_TICK = 1.0
#: A comment this often keeps proxies from closing a quiet stream.
_KEEPALIVE = 15.0
#: Changes arriving together are sent together.
_COALESCE = 0.1
#: The most rows a stream sends for what changed before it connected (a page's worth).
PAGE_ROWS = 50
#: Where a line ends in the server-sent events format: CRLF, CR or LF.
_LINE_END = re.compile(r"\r\n|\r|\n")


def sse(event: str, data: str = "", event_id: str | None = None) -> str:
    """One event; ``data`` may hold any text (each of its lines its own ``data:`` field, which
    the browser joins again with LF)."""
    if _LINE_END.search(event) or (event_id is not None and _LINE_END.search(event_id)):
        raise ValueError(f"an event's name and id are one line: {event!r}, {event_id!r}")
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines += [f"data: {line}" for line in _LINE_END.split(data)]
    return "\n".join(lines) + "\n\n"


class _Stream(StreamingResponse):
    """An event stream holding a slot, given back however the stream ends (its body done,
    the client gone, the service stopping) or if it never started."""

    def __init__(self, body: AsyncGenerator[str], slot: Slot) -> None:
        super().__init__(
            body,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._body, self._slot = body, slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                await self._body.aclose()
            finally:
                self._slot.release()


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]
    feed = ui.server.runs.feed
    env = ui.templates.env
    limits = ui.server.base_settings.service.live_streams
    slots = StreamSlots(limits.per_user, limits.total, limits.retry_after)
    followers = LogFollowers(slots, feed, ui.server.runs.logs, _finished(ui))
    off_loop = slots.off_loop

    def take(session: Session) -> Slot | Response:
        """A slot for one more stream of the session's user, or the 429 saying which limit
        is reached."""
        try:
            return slots.take(session.who.user)
        except StreamsRefused as refused:
            return PlainTextResponse(
                refused.reason, 429, headers={"Retry-After": str(refused.retry_after)}
            )

    def going_on(session: Session) -> Callable[[], bool]:
        """What a stream asks before each event and each second it waits: the service up,
        the session still logged in."""
        return lambda: not ui.stopping() and ui.sessions.holds(session)

    async def visible(session: Session, uid: str, slot: Slot) -> RunRecord:
        """The run, if the session's user may see it; the slot goes back if not."""
        try:
            return await off_loop(visible_run, ui, session, uid)
        except BaseException:
            slot.release()
            raise

    @routes.get("/projects/{project}/jobs/live")
    async def jobs_live(
        session: LoggedIn,
        project: str,
        state: Annotated[str, Query(max_length=16)] = "",
        owner: Annotated[str, Query(max_length=253)] = "",
        name: Annotated[str, Query(max_length=63)] = "",
        label: Annotated[str, Query(max_length=400)] = "",
        created_since: Annotated[str, Query(max_length=32)] = "",
        created_until: Annotated[str, Query(max_length=32)] = "",
        since: Annotated[float | None, Query(ge=0, le=2**40)] = None,
    ) -> Response:
        """Rows of the runs list as they change: ``run`` (a row, and whether it matches the
        page's filters) or ``reload`` (too much changed at once)."""
        filters = RunFilters(state, owner, name, label, created_since, created_until)
        wanted = RunState.named("state", state).value if state else ""
        listing = filter_of(session, project, filters)
        owner_seen = session.who.owner_filter()
        row = env.get_template("jobs_row.html")
        slot = take(session)
        if isinstance(slot, Response):
            return slot
        alive = going_on(session)

        def matching(records: list[RunRecord]) -> set[str]:
            """Which of the changed rows the page's filters take: beyond a state, asked of
            the store (a brief row has no labels to compare)."""
            if filters.counted and not filters.owner:
                return {r.uid for r in records if not wanted or r.state.value == wanted}
            uids = [r.uid for r in records]
            asked = listing.copy()
            asked["uids"], asked["brief"] = uids, True
            return {r.uid for r in ui.server.runs.list_runs(limit=len(uids), **asked)}

        def row_event(record: RunRecord, matched: set[str]) -> str:
            payload = {
                "uid": record.uid,
                "html": row.render(run=record),
                "match": record.uid in matched,
            }
            return sse("run", json.dumps(payload))

        async def body() -> AsyncGenerator[str]:
            async with feed.subscribe() as changes:
                yield "retry: 2000\n\n"
                if since is not None:  # what changed between the page and this subscription
                    recent = await off_loop(
                        ui.server.runs.list_runs,
                        project=project,
                        owner=owner_seen,
                        updated_since=since,
                        limit=PAGE_ROWS,
                        brief=True,
                    )
                    matched = await off_loop(matching, recent)
                    for record in reversed(recent):
                        yield row_event(record, matched)
                quiet = 0.0
                while alive():
                    changed = await changes.changed(_TICK)
                    if not changed:
                        quiet += _TICK
                        if quiet >= _KEEPALIVE:
                            quiet = 0.0
                            yield ": keepalive\n\n"
                        continue
                    await asyncio.sleep(_COALESCE)
                    changed |= await changes.changed(0)
                    if not alive():
                        break
                    if None in changed:
                        yield sse("reload")
                        continue
                    uids = [uid for uid in changed if uid is not None]
                    records = await off_loop(
                        ui.server.runs.list_runs,
                        project=project,
                        owner=owner_seen,
                        uids=uids,
                        limit=len(uids),
                        brief=True,
                    )
                    matched = await off_loop(matching, records)
                    for record in reversed(records):  # oldest first: prepending keeps order
                        yield row_event(record, matched)

        return _Stream(body(), slot)

    @routes.get("/runs/{uid}/live")
    async def run_live(session: LoggedIn, uid: str) -> Response:
        """The run's state, transitions, results and artifacts, each time they change; the
        stream ends with the run."""
        slot = take(session)
        if isinstance(slot, Response):
            return slot
        record = await visible(session, uid, slot)
        summary = env.get_template("run_live.html")
        alive = going_on(session)

        async def body() -> AsyncGenerator[str]:
            async with feed.subscribe() as changes:
                yield "retry: 2000\n\n"
                # What changed between the page and this subscription is sent first.
                current = await off_loop(ui.server.runs.get, record.uid)
                charts = await off_loop(run_charts, ui, current)
                yield sse("summary", summary.render(run=current, charts=charts))
                quiet = 0.0
                while not current.finished:
                    if not alive():
                        return
                    changed = await changes.changed(_TICK)
                    if current.uid not in changed and None not in changed:
                        if current.state is RunState.RUNNING:  # its usage moves on
                            fresh = await off_loop(run_charts, ui, current)
                            if [c.words for c in fresh] != [c.words for c in charts]:
                                charts, quiet = fresh, 0.0
                                yield sse("summary", summary.render(run=current, charts=charts))
                                continue
                        quiet += _TICK
                        if quiet >= _KEEPALIVE:
                            quiet = 0.0
                            yield ": keepalive\n\n"
                        continue
                    current = await off_loop(ui.server.runs.get, current.uid)
                    charts = await off_loop(run_charts, ui, current)
                    if alive():
                        yield sse("summary", summary.render(run=current, charts=charts))
                yield sse("end")

        return _Stream(body(), slot)

    @routes.get("/runs/{uid}/logs/live")
    async def logs_live(
        request: Request,
        session: LoggedIn,
        uid: str,
        offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    ) -> Response:
        """The run's output from ``offset`` (or the last event id) as it is written: ``log``
        events whose id is the next offset, then ``end`` once the run ended and all of it
        was sent."""
        resumed = request.headers.get("last-event-id", "")
        start = whole_number("Last-Event-ID", resumed, 0, 2**53) if resumed else offset
        slot = take(session)
        if isinstance(slot, Response):
            return slot
        record = await visible(session, uid, slot)
        alive = going_on(session)

        async def body() -> AsyncGenerator[str]:
            yield "retry: 2000\n\n"
            async with followers.follow(record.uid, start) as follower:
                position, sent = start, time.monotonic()
                # A character split between two reads is decoded whole, on the second.
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                while alive() and not follower.failed:
                    chunk = follower.since(position)
                    if chunk is None:  # behind what the follower keeps: read on its own
                        chunk, after = await followers.read(record.uid, position)
                        if not chunk:  # nothing there (removed): go on from what is kept
                            position = max(position, follower.base)
                            continue
                    else:
                        after = position + len(chunk)
                    if chunk:
                        position, sent = after, time.monotonic()
                        if alive():
                            yield sse("log", json.dumps(decoder.decode(chunk)), str(position))
                        continue
                    if follower.done:
                        if not follower.failed:
                            yield sse("end", "", str(position))
                        return
                    await _more(follower, position)
                    if time.monotonic() - sent >= _KEEPALIVE:
                        sent = time.monotonic()
                        yield ": keepalive\n\n"

        return _Stream(body(), slot)

    return routes


async def _more(follower: LogFollower, position: int) -> None:
    """Wait for output past ``position``, the run's end, or the follower's next beat (within
    a second): no timer of its own, however many streams wait."""
    async with follower.changed:
        if follower.end <= position and not follower.done:
            await follower.changed.wait()


def _finished(ui: UI) -> Callable[[str], bool]:
    """Whether a run ended (or is gone): its output grows no more."""

    def finished(uid: str) -> bool:
        state = ui.server.runs.store.state_of(uid)
        return state is None or state.terminal

    return finished

"""Live pages: server-sent events driven by the service's own run feed.

A stream wakes when the recorder writes a change (:class:`~runplane.service.feed.RunFeed`) and
then reads only the runs that changed, once per burst: nothing queries the database on a
timer. A run's output is read through the runtime from the byte offset the browser has (the
event id, so a reconnecting browser resumes where it was); while the run is live it is read
again when the run changes or after a short pause, since output is not an event. Streams end
when the service shuts down, so open pages never hold up a restart.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import asyncio
import codecs
import json
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from runplane.runs import RunRecord, RunState
from runplane.spec.numbers import whole_number
from runplane.ui.pages.runs import RunFilters, filter_of, visible_run
from runplane.ui.sessions import Session
from runplane.ui.web import UI

#: How long a stream waits for a change before it checks for shutdown.
_TICK = 1.0
#: A comment this often keeps proxies from closing a quiet stream.
_KEEPALIVE = 15.0
#: Changes arriving together are sent together.
_COALESCE = 0.1
#: The most rows a stream sends for what changed before it connected (a page's worth).
PAGE_ROWS = 50
#: Pauses between reads of a live run's output while nothing arrives.
_LOG_PAUSES = (0.25, 0.5, 1.0)


def sse(event: str, data: str = "", event_id: str | None = None) -> str:
    lines = [f"event: {event}"]
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines += [f"data: {line}" for line in data.split("\n")]
    return "\n".join(lines) + "\n\n"


def _stream(body: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]
    feed = ui.server.runs.feed
    env = ui.templates.env

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
    ) -> StreamingResponse:
        """Rows of the runs list as they change: ``run`` (a row, and whether it matches the
        page's filters) or ``reload`` (too much changed at once)."""
        filters = RunFilters(state, owner, name, label, created_since, created_until)
        wanted = RunState.named("state", state).value if state else ""
        listing = filter_of(session, project, filters)
        owner_seen = session.who.owner_filter()
        row = env.get_template("jobs_row.html")

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

        async def body() -> AsyncIterator[str]:
            async with feed.subscribe() as changes:
                yield "retry: 2000\n\n"
                if since is not None:  # what changed between the page and this subscription
                    recent = await run_in_threadpool(
                        ui.server.runs.list_runs,
                        project=project,
                        owner=owner_seen,
                        updated_since=since,
                        limit=PAGE_ROWS,
                        brief=True,
                    )
                    matched = await run_in_threadpool(matching, recent)
                    for record in reversed(recent):
                        yield row_event(record, matched)
                quiet = 0.0
                while not ui.stopping():
                    changed = await changes.changed(_TICK)
                    if not changed:
                        quiet += _TICK
                        if quiet >= _KEEPALIVE:
                            quiet = 0.0
                            yield ": keepalive\n\n"
                        continue
                    await asyncio.sleep(_COALESCE)
                    changed |= await changes.changed(0)
                    if None in changed:
                        yield sse("reload")
                        continue
                    uids = [uid for uid in changed if uid is not None]
                    records = await run_in_threadpool(
                        ui.server.runs.list_runs,
                        project=project,
                        owner=owner_seen,
                        uids=uids,
                        limit=len(uids),
                        brief=True,
                    )
                    matched = await run_in_threadpool(matching, records)
                    for record in reversed(records):  # oldest first: prepending keeps order
                        yield row_event(record, matched)

        return _stream(body())

    @routes.get("/runs/{uid}/live")
    async def run_live(session: LoggedIn, uid: str) -> StreamingResponse:
        """The run's state, transitions, results and artifacts, each time they change; the
        stream ends with the run."""
        record: RunRecord = await run_in_threadpool(visible_run, ui, session, uid)
        summary = env.get_template("run_live.html")

        async def body() -> AsyncIterator[str]:
            async with feed.subscribe() as changes:
                yield "retry: 2000\n\n"
                # What changed between the page and this subscription is sent first.
                current = await run_in_threadpool(ui.server.runs.get, record.uid)
                yield sse("summary", summary.render(run=current))
                while not current.finished and not ui.stopping():
                    changed = await changes.changed(_TICK)
                    if current.uid not in changed and None not in changed:
                        continue
                    current = await run_in_threadpool(ui.server.runs.get, current.uid)
                    yield sse("summary", summary.render(run=current))
                yield sse("end")

        return _stream(body())

    @routes.get("/runs/{uid}/logs/live")
    async def logs_live(
        request: Request,
        session: LoggedIn,
        uid: str,
        offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    ) -> StreamingResponse:
        """The run's output from ``offset`` (or the last event id) as it is written: ``log``
        events whose id is the next offset, then ``end`` once the run ended and all of it
        was sent."""
        record: RunRecord = await run_in_threadpool(visible_run, ui, session, uid)
        resumed = request.headers.get("last-event-id", "")
        start = whole_number("Last-Event-ID", resumed, 0, 2**53) if resumed else offset

        async def body() -> AsyncIterator[str]:
            async with feed.subscribe() as changes:
                yield "retry: 2000\n\n"
                state = await run_in_threadpool(ui.server.runs.store.state_of, record.uid)
                position, finished, pause = start, state is None or state.terminal, 0
                # A character split between two reads is decoded whole, on the second.
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                while not ui.stopping():
                    chunk, position_after = await run_in_threadpool(
                        ui.server.runs.logs, record.uid, position
                    )
                    if chunk:
                        position, pause = position_after, 0
                        yield sse("log", json.dumps(decoder.decode(chunk)), str(position))
                        continue
                    if finished:
                        break
                    changed = await changes.changed(_LOG_PAUSES[pause])
                    pause = min(pause + 1, len(_LOG_PAUSES) - 1)
                    if record.uid in changed or None in changed:
                        state = await run_in_threadpool(ui.server.runs.store.state_of, record.uid)
                        finished = state is None or state.terminal
                yield sse("end", "", str(position))

        return _stream(body())

    return routes

"""What the web UI asks of the run store beyond the API: pages, brief rows, changed rows."""

from __future__ import annotations

import time

from .conftest import USER, wait_state


def test_pages_of_runs_brief_rows_and_rows_changed_since(server, client, function_dict):
    uids = [
        client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()["uid"]
        for _ in range(3)
    ]
    for uid in uids:
        wait_state(client, uid, {"completed"})
    runs = server.runs
    assert runs.count_runs(project="default", owner="bob") == 3
    assert runs.count_runs(project="default", owner="alice") == 0
    newest_first = [r.uid for r in runs.list_runs(project="default", limit=10)]
    assert newest_first == uids[::-1]
    first_page, cursor = runs.page(project="default", limit=2)
    assert [r.uid for r in first_page] == uids[:0:-1]
    second_page, last = runs.page(project="default", limit=2, after=cursor)
    assert ([r.uid for r in second_page], last) == ([uids[0]], None)
    full = runs.get(uids[0])
    (brief,) = runs.list_runs(uids=[uids[0]], brief=True)
    assert (brief.function, brief.transitions, brief.artifacts) == ({}, [], [])
    assert brief.attempts == full.attempts
    assert (brief.state, brief.requests, brief.results) == (full.state, full.requests, full.results)
    later = time.time() + 1
    assert runs.list_runs(updated_since=later) == []
    assert {r.uid for r in runs.list_runs(updated_since=full.created_at)} == set(uids)

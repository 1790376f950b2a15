"""What the web UI asks of the run store beyond the API: pages, brief rows, changed rows."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from runplane.service.api import create_app
from runplane.ui.app import mount

from .conftest import USER, log_in, wait_state
from .statements import Statements, outside_the_service


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


def test_the_runs_list_swapped_in_reads_only_what_it_shows(server, monkeypatch):
    """A filter's change or a Next page asks for the list alone (htmx): its runs, their
    attempts and the count, not the left menu's projects nor the project's record, which only
    the whole page shows. Counted in SQL statements, which no machine's speed changes."""
    app = create_app(server)
    mount(app, server)
    client = TestClient(app)
    log_in(client, USER["Authorization"].removeprefix("Bearer "))
    url = "/ui/projects/default/jobs"
    for headers in ({}, {"HX-Request": "true"}):  # each read once before it is counted
        assert client.get(url, headers=headers).status_code == 200
    counting = Statements(monkeypatch, outside_the_service)
    before = counting.total()
    whole = client.get(url)
    between = counting.total()
    swapped = client.get(url, headers={"HX-Request": "true"})
    after = counting.total()
    assert whole.status_code == swapped.status_code == 200
    assert "Switch project" in whole.text
    assert "Switch project" not in swapped.text
    assert swapped.text.lstrip().startswith('<section id="runs"')
    assert after - between < between - before
    assert after - between <= 3  # the page of runs, their attempts, the count

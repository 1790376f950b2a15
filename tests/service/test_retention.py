"""Retention over a real database: finished runs removed by age and by count, the service's
policy or a project's, their files with them; records that outlive their output; live runs
kept; the API answering while thousands of runs are removed; the policy as the API takes it."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.engine import Engine

from runplane.runs import RunState
from runplane.runtimes.output import append_output, finish_output
from runplane.service import run_counts
from runplane.service.db.models import RUNS
from runplane.service.retention import Retention
from runplane.service.server import Server
from runplane.service.wire import LOGS_REMOVED
from runplane.spec.retention import RetentionPolicy

from .conftest import ADMIN, USER, log_in
from .run_rows import run_row

#: The clock of these tests: "now", and what lies days before it.
NOW = 2_000_000_000.0
DAY = 86400.0


def engine_of(server: Server) -> Engine:
    return server.runs.store._engine


def add_runs(
    server: Server,
    project: str,
    ended: list[float | None],
    files: bool = False,
) -> list[str]:
    """Runs recorded as if they had run: ended at each of ``ended`` (seconds before NOW), or
    still running (``None``); created in that order, a second apart. With ``files``, each has
    an artifact and output in its directory (compressed when it ended)."""
    uids = add_runs_to(engine_of(server), project, ended)
    for uid, ago in zip(uids, ended, strict=True):
        if files:
            directory = server.settings.local.home / "runs" / uid
            (directory / "artifacts").mkdir(parents=True)
            (directory / "artifacts" / "model.bin").write_bytes(b"weights")
            append_output(directory, f"output of {uid}\n".encode(), 1 << 20)
            if ago is not None:
                finish_output(directory, 1 << 20)
    return uids


def add_runs_to(engine: Engine, project: str, ended: list[float | None]) -> list[str]:
    rows: list[dict[str, Any]] = []
    for index, ago in enumerate(ended):
        rows.append(
            run_row(
                NOW - 1000 * DAY + index,
                project=project,
                state=RunState.RUNNING.value if ago is None else RunState.COMPLETED.value,
                ended_at=None if ago is None else NOW - ago,
            )
        )
    with engine.begin() as connection:
        connection.execute(insert(RUNS), rows)
        # Counted as the store counts the runs it records.
        run_counts.add(connection, Counter((project, "bob", row["state"]) for row in rows))
    return [row["uid"] for row in rows]


def kept(server: Server, project: str) -> set[str]:
    return {record.uid for record in server.runs.list_runs(project=project, limit=1000)}


def run_dir(server: Server, uid: str) -> Path:
    return server.settings.local.home / "runs" / uid


def test_finished_runs_past_their_age_go_with_their_files_and_live_runs_stay(server):
    old = add_runs(server, "aged", [40 * DAY, 31 * DAY], files=True)
    young = add_runs(server, "aged", [29 * DAY, 1 * DAY], files=True)
    live = add_runs(server, "aged", [None], files=True)  # a run since long ago, not ended
    swept = server.retention.sweep(RetentionPolicy(runs_max_age="30d"), {}, NOW)
    assert swept.runs == 2
    assert kept(server, "aged") == {*young, *live}
    assert not any(run_dir(server, uid).exists() for uid in old)
    assert all(run_dir(server, uid).exists() for uid in young + live)
    assert server.retention.sweep(RetentionPolicy(runs_max_age="30d"), {}, NOW).runs == 0


def test_only_the_newest_finished_runs_of_each_project_are_kept(server, client):
    busy = add_runs(server, "busy", [9 * DAY, 8 * DAY, None, 7 * DAY, 6 * DAY, 5 * DAY])
    quiet = add_runs(server, "quiet", [9 * DAY, 8 * DAY])
    own = add_runs(server, "own", [9 * DAY, 8 * DAY, 7 * DAY, 6 * DAY])
    client.post("/api/v1/projects", headers=USER, json={"name": "own"})
    answer = client.patch(
        "/api/v1/projects/own", headers=ADMIN, json={"retention": {"runs_max_count": 3}}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["retention"] == {"runs_max_count": 3}
    policy = RetentionPolicy(runs_max_count=2)
    swept = server.retention.sweep(policy, server.projects.retention_overrides(), NOW)
    assert swept.runs == 3 + 0 + 1
    assert kept(server, "busy") == {busy[2], busy[4], busy[5]}  # the live one, and two newest
    assert kept(server, "quiet") == set(quiet)
    assert kept(server, "own") == set(own[1:])


def test_a_project_keeps_its_runs_longer_or_for_ever_whatever_the_service_says(server, client):
    forever = add_runs(server, "forever", [400 * DAY])
    shorter = add_runs(server, "shorter", [3 * DAY, 1 * DAY])
    other = add_runs(server, "other", [400 * DAY])
    for name, terms in (("forever", {"runs_max_age": None}), ("shorter", {"runs_max_age": "2d"})):
        made = client.post(
            "/api/v1/projects", headers=ADMIN, json={"name": name, "retention": terms}
        )
        assert made.status_code == 201, made.text
    policy = RetentionPolicy(runs_max_age="90 days")
    server.retention.sweep(policy, server.projects.retention_overrides(), NOW)
    assert kept(server, "forever") == set(forever)
    assert kept(server, "shorter") == {shorter[1]}
    assert kept(server, "other") == set()
    assert other


def test_a_record_outlives_its_output_and_says_it_was_removed(server, client):
    old, young = add_runs(server, "logs", [10 * DAY, 1 * DAY], files=True)
    live = add_runs(server, "logs", [None], files=True)[0]
    client.post(
        "/api/v1/projects",
        headers=ADMIN,
        json={"name": "logs", "retention": {"logs_max_age": "7d"}},
    )
    swept = server.sweep(NOW)  # the service's policy: records kept, the project's logs age
    assert (swept.runs, swept.files) == (0, 1)
    assert kept(server, "logs") == {old, young, live}
    assert not run_dir(server, old).exists()  # output and artifacts
    record = client.get(f"/api/v1/runs/{old}", headers=USER).json()
    assert record["logs_removed_at"] == NOW
    answer = client.get(f"/api/v1/runs/{old}/logs", headers=USER)
    assert answer.status_code == 200
    assert answer.headers[LOGS_REMOVED] == str(NOW)
    assert b"removed by the retention policy" in answer.content
    assert b"output of" in client.get(f"/api/v1/runs/{young}/logs", headers=USER).content
    assert b"output of" in client.get(f"/api/v1/runs/{live}/logs", headers=USER).content
    assert LOGS_REMOVED not in client.get(f"/api/v1/runs/{young}/logs", headers=USER).headers
    assert server.sweep(NOW).files == 0  # marked: not chosen again


def test_the_api_answers_while_thousands_of_runs_are_removed(server, client):
    total, batch = 3000, 200
    add_runs(server, "big", [30 * DAY] * total)
    (watched,) = add_runs(server, "big", [None])
    seen: list[int] = []

    def between_batches() -> bool:
        """Each batch is committed on its own: the API answers, and sees the runs go."""
        answer = client.get(f"/api/v1/runs/{watched}", headers=USER)
        assert answer.status_code == 200
        seen.append(server.runs.count_runs(project="big"))
        return False

    retention = Retention(engine_of(server), server.settings.local.home / "runs", batch)
    swept = retention.sweep(RetentionPolicy(runs_max_age="1d"), {}, NOW, stop=between_batches)
    assert swept.runs == total
    assert len(seen) >= total // batch
    assert seen == sorted(seen, reverse=True)
    assert seen[0] == total + 1 - batch  # the first batch alone, committed and visible
    assert seen[-1] == 1
    assert kept(server, "big") == {watched}


def test_a_pass_stops_between_batches_when_the_service_stops(server):
    add_runs(server, "halted", [30 * DAY] * 50)
    retention = Retention(engine_of(server), server.settings.local.home / "runs", 10)
    swept = retention.sweep(RetentionPolicy(runs_max_age="1d"), {}, NOW, stop=lambda: True)
    assert swept.runs == 10
    assert server.runs.count_runs(project="halted") == 40


@pytest.mark.parametrize(
    ("terms", "field"),
    [
        ({"runs_max_age": "a month"}, "retention.runs_max_age"),
        ({"runs_max_count": -5}, "retention.runs_max_count"),
        ({"logs_max_age": "5 seconds"}, "retention.logs_max_age"),
        ({"max_age": "30d"}, "retention.max_age"),
    ],
)
def test_bad_retention_terms_are_refused_with_their_field(client, terms, field):
    client.post("/api/v1/projects", headers=USER, json={"name": "strict"})
    answer = client.patch("/api/v1/projects/strict", headers=ADMIN, json={"retention": terms})
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert field in answer.text
    assert "example" in str(error)


def test_only_admins_set_a_projects_policy_which_removes_every_users_runs(client):
    """A record is its first creator's, and runs in a project are their owners': a policy
    set by whoever named the project first could remove everyone else's runs."""
    terms = {"retention": {"runs_max_count": 1}}
    refused = client.post("/api/v1/projects", headers=USER, json={"name": "mine", **terms})
    assert refused.status_code == 403
    assert "retention" in refused.json()["message"]
    client.post("/api/v1/projects", headers=USER, json={"name": "mine"})
    assert client.patch("/api/v1/projects/mine", headers=USER, json=terms).status_code == 403
    assert client.patch("/api/v1/projects/mine", headers=ADMIN, json=terms).status_code == 200
    assert client.get("/api/v1/projects/mine", headers=USER).json()["retention"] == {
        "runs_max_count": 1
    }
    described = client.patch("/api/v1/projects/mine", headers=USER, json={"description": "x"})
    assert described.status_code == 200  # the owner still changes the rest
    cleared = client.patch("/api/v1/projects/mine", headers=ADMIN, json={"retention": {}})
    assert cleared.json()["retention"] == {}


def test_the_loop_removes_in_the_background_by_the_services_policy(server):
    """By default records stay and output goes after 90 days."""
    old, young = add_runs(server, "loop", [91 * DAY, 89 * DAY], files=True)
    server.clock = lambda: NOW
    server.wake_retention()
    deadline = time.monotonic() + 30
    while server.runs.get(old).logs_removed_at is None:
        assert time.monotonic() < deadline, "the loop made no pass"
        time.sleep(0.05)
    assert not run_dir(server, old).exists()
    assert run_dir(server, young).exists()
    assert kept(server, "loop") == {old, young}


def test_a_database_with_runs_and_projects_upgrades_to_retention(empty_database):
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    from runplane.service.db import MIGRATIONS, connect
    from runplane.service.projects import ProjectStore
    from runplane.service.records import RunStore

    before = create_engine(empty_database)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with before.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0007")
        connection.execute(
            text(
                "INSERT INTO projects (name, owner, description, params, default_image, labels,"
                " created_at, updated_at) VALUES ('kept', 'bob', '', '{}', '', '{}', 1, 1)"
            )
        )
    before.dispose()
    engine = connect(empty_database)  # upgrades to the newest migration
    assert ProjectStore(engine).get("kept").retention == {}
    assert ProjectStore(engine).retention_overrides() == {}
    (uid,) = add_runs_to(engine, "kept", [DAY])
    assert RunStore(engine).get(uid).logs_removed_at is None
    engine.dispose()


def test_the_ui_says_a_runs_output_was_removed(server):

    from fastapi.testclient import TestClient

    from runplane.service.api import create_app
    from runplane.ui.app import mount

    (uid,) = add_runs(server, "shown", [200 * DAY], files=True)
    server.sweep(NOW)  # the service's policy: output after 90 days
    app = create_app(server)
    mount(app, server)
    browser = TestClient(app)
    log_in(browser, USER["Authorization"].removeprefix("Bearer "))
    page = browser.get(f"/ui/runs/{uid}")
    assert page.status_code == 200, page.text
    assert 'id="logs-removed"' in page.text
    assert "removed by the retention policy" in page.text

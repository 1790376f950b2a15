"""Spend budgets per project through the service: set and cleared by admins only, bad input
refused by field, the spend of a period read against an injected clock, and what new runs meet
at the limit (warn, hold, spot-only); a held run starts once its budget admits it."""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import insert

from runplane.config import NodeGroupPrice
from runplane.runs import RunState
from runplane.service import run_counts
from runplane.service.budgets import Period, period_bounds
from runplane.service.db.models import ATTEMPTS, RESIZES, RUNS
from runplane.service.server import Server
from tests.homes import enter_private_home
from tests.service.cli_service import invoke
from tests.service.conftest import ADMIN, USER, wait_state
from tests.service.older_databases import older_database
from tests.service.run_rows import run_row

#: 1 per hour for a whole 1-CPU node: a run asking for all of it pays 1 an hour.
HOUR = 3600.0
PRICES = {"on-demand": {"hourly_price": 1.0, "cpu": "1", "memory": "1Gi"}}


def utc(*when: int) -> float:
    return datetime.datetime(*when, tzinfo=datetime.UTC).timestamp()


def priced(server: Server) -> None:
    """The service prices the on-demand group (its settings, as an admin's change sets them)."""
    settings = server.runs.settings
    groups = {name: NodeGroupPrice(**price) for name, price in PRICES.items()}
    service = settings.service.model_copy(update={"node_groups": groups})
    server.runs.settings = settings.model_copy(update={"service": service})


def spend(
    server: Server,
    project: str,
    started: float,
    ended: float | None,
    cpu: str = "1",
    resized_at: float | None = None,
) -> str:
    """A run of ``project`` that asked for ``cpu`` of a priced 1-CPU node from ``started`` to
    ``ended`` (still running when ``None``), written as the store writes one; resized in place
    to the whole node at ``resized_at`` if given."""
    return write_run(server.runs.store.engine, project, started, ended, cpu, resized_at)


def write_run(
    engine: Any,
    project: str,
    started: float,
    ended: float | None,
    cpu: str = "1",
    resized_at: float | None = None,
) -> str:
    """:func:`spend`'s run, written to the store of ``engine``."""
    row = run_row(
        started,
        project=project,
        state=RunState.RUNNING.value if ended is None else RunState.COMPLETED.value,
        requests={"cpu": cpu},
        started_at=started,
        ended_at=ended,
        resized=0 if resized_at is None else 1,
    )
    with engine.begin() as connection:
        connection.execute(insert(RUNS), [row])
        connection.execute(
            insert(ATTEMPTS),
            [
                {
                    "run_uid": row["uid"],
                    "number": 1,
                    "node": "n",
                    "started_at": started,
                    "ended_at": ended,
                    "reason": "",
                    "node_group": "on-demand",
                    "requests": {"cpu": cpu},
                    "limits": {"cpu": cpu},
                    "adjustments": "",
                }
            ],
        )
        if resized_at is not None:  # the limit (and the request by as much) up to 1 CPU
            grown = 1000 - int(cpu.removesuffix("m"))
            connection.execute(
                insert(RESIZES),
                [
                    {
                        "run_uid": row["uid"],
                        "at": resized_at,
                        "attempt": 1,
                        "memory_from": None,
                        "memory_to": None,
                        "cpu_from": 1000 - grown,
                        "cpu_to": 1000,
                        "why": "by hand",
                        "mode": "manual",
                        "by": "bob",
                        "outcome": "applied",
                    }
                ],
            )
        run_counts.add(connection, Counter({(project, "bob", row["state"]): 1}))
    return str(row["uid"])


def make_project(client: Any, name: str) -> None:
    made = client.post("/api/v1/projects", json={"name": name}, headers=USER)
    assert made.status_code in (200, 201), made.text


def put_budget(client: Any, project: str, headers: dict[str, str] = ADMIN, **body: Any) -> Any:
    return client.put(f"/api/v1/projects/{project}/budget", json=body, headers=headers)


def submit(
    client: Any, function_dict: Any, project: str, mode: str | None = None
) -> dict[str, Any]:
    fn = function_dict()
    fn["metadata"]["project"] = project
    if mode:
        fn["spec"]["preemption_mode"] = mode
    answer = client.post("/api/v1/runs", json={"function": fn}, headers=USER)
    assert answer.status_code == 201, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_periods_begin_at_midnight_utc() -> None:
    at = utc(2026, 11, 26, 14, 13)  # a Thursday
    assert period_bounds(Period.DAY, at) == (utc(2026, 11, 26), utc(2026, 11, 27))
    assert period_bounds(Period.WEEK, at) == (utc(2026, 11, 23), utc(2026, 11, 30))
    assert period_bounds(Period.MONTH, at) == (utc(2026, 11, 1), utc(2026, 12, 1))
    assert period_bounds(Period.MONTH, utc(2026, 12, 31, 23, 59)) == (
        utc(2026, 12, 1),
        utc(2027, 1, 1),
    )
    assert period_bounds(Period.MONTH, utc(2027, 1, 1)) == (utc(2027, 1, 1), utc(2027, 2, 1))


def test_only_admins_set_and_clear_a_budget_and_everyone_reads_it(client) -> None:
    make_project(client, "team-a")
    read = client.get("/api/v1/projects/team-a/budget", headers=USER)
    assert read.status_code == 200, read.text
    assert read.json() == {"project": "team-a", "budget": None}

    refused = put_budget(client, "team-a", USER, amount=500)
    assert refused.status_code == 403
    assert refused.json()["field"] == "budget"
    assert (
        "user 'bob' may read it but not set it (admins: any project's)"
        in (refused.json()["message"])
    )
    assert client.delete("/api/v1/projects/team-a/budget", headers=USER).status_code == 403

    done = put_budget(client, "team-a", amount="500", period="week", action="hold")
    assert done.status_code == 200, done.text
    shown = client.get("/api/v1/projects/team-a/budget", headers=USER).json()
    assert shown["budget"]["amount"] == 500
    assert shown["budget"]["period"] == "week"
    assert shown["budget"]["action"] == "hold"
    assert shown["budget"]["updated_by"] == "alice"
    assert shown["reached"] is False
    assert shown["text"] == "budget: project team-a spent 0.00 of 500 this week"

    cleared = client.delete("/api/v1/projects/team-a/budget", headers=ADMIN)
    assert cleared.status_code == 200
    assert cleared.json()["budget"] is None
    missing = put_budget(client, "no-such-project", amount=5)
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("body", "field", "allowed"),
    [
        ({"amount": "\uff15\uff10\uff10"}, "amount", "ASCII digits"),  # full-width 500
        ({"amount": "\u0665\u0660\u0660"}, "amount", "ASCII digits"),  # Arabic-Indic 500
        ({"amount": "500 EUR"}, "amount", "ASCII digits"),
        ({"amount": -1}, "amount", "a number from 0 to"),
        ({"amount": True}, "amount", "a number from 0 to"),
        ({"amount": "1e999"}, "amount", "a number from 0 to"),
        ({}, "amount", "a budget needs an amount"),
        ({"amount": 5, "period": "year"}, "period", "one of day, week, month"),
        ({"amount": 5, "action": "stop"}, "action", "one of warn, hold, spot-only"),
        ({"amount": 5, "currency": "EUR"}, "currency", "a budget has amount, period, action"),
    ],
)
def test_bad_budgets_are_refused_by_field_and_nothing_is_kept(
    client, body: dict[str, Any], field: str, allowed: str
) -> None:
    make_project(client, "team-b")
    refused = put_budget(client, "team-b", **body)
    assert refused.status_code == 422, refused.text
    answer = refused.json()
    assert answer["field"] == field
    assert allowed in answer["message"]
    assert "(example: " in answer["message"]
    assert client.get("/api/v1/projects/team-b/budget", headers=USER).json()["budget"] is None


def test_spend_counts_the_part_of_each_attempt_inside_the_period(server, client) -> None:
    priced(server)
    make_project(client, "spender")
    now = utc(2026, 11, 26, 12)
    server.runs.budgets.clock = lambda: now
    spend(server, "spender", utc(2026, 10, 31, 23), utc(2026, 11, 1, 2))  # 2 h in November
    spend(server, "spender", utc(2026, 11, 20), utc(2026, 11, 20, 3))  # 3 h
    spend(server, "spender", utc(2026, 11, 26, 10, 30), None)  # running: 1.5 h so far
    spend(server, "elsewhere", utc(2026, 11, 20), utc(2026, 11, 21))  # another project's
    assert put_budget(client, "spender", amount=10).status_code == 200
    shown = client.get("/api/v1/projects/spender/budget", headers=USER).json()
    assert shown["spent"] == pytest.approx(6.5)
    assert shown["text"] == "budget: project spender spent 6.50 of 10 this month"
    assert shown["period_start"] == utc(2026, 11, 1)
    assert shown["period_end"] == utc(2026, 12, 1)
    assert put_budget(client, "spender", amount=10, period="day").status_code == 200
    today = client.get("/api/v1/projects/spender/budget", headers=USER).json()
    assert today["spent"] == pytest.approx(1.5)
    assert today["text"] == "budget: project spender spent 1.50 of 10 today"


def test_a_resized_run_spends_each_interval_at_the_requests_in_force(server, client) -> None:
    priced(server)
    make_project(client, "grower")
    now = utc(2026, 11, 26, 12)
    server.runs.budgets.clock = lambda: now
    # half a node for 2 h, then the whole node for 1 h: 1 + 1
    day = utc(2026, 11, 26)
    spend(server, "grower", day + 1 * HOUR, day + 4 * HOUR, "500m", day + 3 * HOUR)
    # half a node until the resize at 10:00, the whole node since: 1 + 2 so far
    spend(server, "grower", day + 8 * HOUR, None, "500m", day + 10 * HOUR)
    assert put_budget(client, "grower", amount=10, period="day").status_code == 200
    shown = client.get("/api/v1/projects/grower/budget", headers=USER).json()
    assert shown["spent"] == pytest.approx(2.0 + 3.0)
    # the part before the period's start is paid at its own size: a week since Monday the 23rd
    monday = utc(2026, 11, 23)
    spend(server, "grower", monday - 2 * HOUR, monday + 2 * HOUR, "500m", monday + HOUR)
    assert put_budget(client, "grower", amount=10, period="week").status_code == 200
    weekly = client.get("/api/v1/projects/grower/budget", headers=USER).json()
    assert weekly["spent"] == pytest.approx(5.0 + 0.5 + 1.0)


def test_runplane_cost_prices_a_resized_run_piecewise(monkeypatch, tmp_path) -> None:
    from runplane.service.db import connect, sqlite_url

    home = enter_private_home(monkeypatch, tmp_path)
    monkeypatch.setenv("RUNPLANE_SERVICE__NODE_GROUPS", json.dumps(PRICES))
    home.mkdir(parents=True, exist_ok=True)
    engine = connect(sqlite_url(home / "runplane.db"))
    try:
        start = utc(2026, 11, 26, 1)
        resized = write_run(engine, "default", start, start + 3 * HOUR, "500m", start + 2 * HOUR)
        plain = write_run(engine, "default", start, start + 3 * HOUR, "500m")
    finally:
        engine.dispose()
    one = invoke("cost", resized)
    assert one.code == 0, one.stderr
    # 2 h at half the node, 1 h at the whole node
    assert one.stdout.startswith(f"run {resized}: 2.00 realised, 2.00 on on-demand"), one.stdout
    assert invoke("cost", plain).stdout.startswith(f"run {plain}: 1.50 realised")
    both = invoke("cost", "--project", "default")
    assert both.stdout.startswith("2 runs of project default: 3.50 realised"), both.stdout


def test_hold_keeps_new_runs_pending_until_the_budget_is_raised(
    server, client, function_dict
) -> None:
    make_project(client, "team-a")
    assert put_budget(client, "team-a", amount=0, action="hold").status_code == 200
    held = submit(client, function_dict, "team-a")
    assert held["state"] == "pending"
    assert held["reason"] == "Budget"
    assert held["status_text"] == "budget: project team-a spent 0.00 of 0 this month"
    server.runs.release_held()  # as the monitor does: still held
    again = client.get(f"/api/v1/runs/{held['uid']}", headers=USER).json()
    assert (again["state"], again["reason"]) == ("pending", "Budget")
    listed = client.get("/api/v1/runs", params={"project": "team-a"}, headers=USER).json()
    assert [run["uid"] for run in listed] == [held["uid"]]

    assert put_budget(client, "team-a", amount=100, action="hold").status_code == 200
    done = wait_state(client, held["uid"], {"completed", "error", "aborted"})
    assert done["state"] == "completed", done
    assert done["results"]["double"] == 2


def test_a_held_run_may_be_aborted(client, function_dict) -> None:
    make_project(client, "team-c")
    assert put_budget(client, "team-c", amount=0, action="hold").status_code == 200
    held = submit(client, function_dict, "team-c")
    aborted = client.post(f"/api/v1/runs/{held['uid']}/abort", headers=USER)
    assert aborted.status_code == 200, aborted.text
    done = wait_state(client, held["uid"], {"aborted", "completed", "error"})
    assert done["state"] == "aborted"
    assert "while its project's budget held it" in done["status_text"]
    assert put_budget(client, "team-c", amount=100).status_code == 200
    assert client.get(f"/api/v1/runs/{held['uid']}", headers=USER).json()["state"] == "aborted"


def test_warn_starts_runs_and_says_so_on_the_run(client, function_dict) -> None:
    make_project(client, "team-w")
    assert put_budget(client, "team-w", amount=0, action="warn").status_code == 200
    run = submit(client, function_dict, "team-w")
    done = wait_state(client, run["uid"], {"completed", "error", "aborted"})
    assert done["state"] == "completed"
    assert done["attempts"][0]["adjustments"] == (
        "budget: project team-w spent 0.00 of 0 this month (warn: runs still start)"
    )


def test_spot_only_constrains_allow_holds_prevent_and_keeps_constrain(
    server, client, function_dict
) -> None:
    make_project(client, "team-s")
    assert put_budget(client, "team-s", amount=0, action="spot-only").status_code == 200
    prevent = submit(client, function_dict, "team-s", "prevent")
    assert (prevent["state"], prevent["reason"]) == ("pending", "Budget")
    assert prevent["status_text"] == (
        "budget: project team-s spent 0.00 of 0 this month; only spot runs start and this "
        "run's preemption mode (prevent) keeps it off spot nodes"
    )
    allow = submit(client, function_dict, "team-s", "allow")
    assert allow["reason"] != "Budget"
    assert allow["attempts"][0]["preemption_mode"] == "constrain"
    assert allow["attempts"][0]["adjustments"].endswith("(spot-only: constrained to spot nodes)")
    constrain = submit(client, function_dict, "team-s", "constrain")
    assert constrain["reason"] != "Budget"
    assert constrain["attempts"][0]["preemption_mode"] == "constrain"
    for run in (allow, constrain):  # this machine is no spot node: they wait for one
        client.post(f"/api/v1/runs/{run['uid']}/abort", headers=USER)
    # Warn lets the held prevent-mode run go (the action changed, the spend did not).
    assert put_budget(client, "team-s", amount=0, action="warn").status_code == 200
    done = wait_state(client, prevent["uid"], {"completed", "error", "aborted"})
    assert done["state"] == "completed", done
    assert done["attempts"][0]["preemption_mode"] == "prevent"
    assert done["attempts"][0]["adjustments"].endswith("(warn: runs still start)")


def test_a_function_sent_again_is_not_left_spot_only_by_a_budget(client, function_dict) -> None:
    """A function sent again as the same JSON is read once and shared by its runs
    (routes.submissions.FunctionsRead): the spot-only budget constrains a copy, so the same
    function sent once the budget is gone runs as it says."""
    make_project(client, "team-again")
    assert put_budget(client, "team-again", amount=0, action="spot-only").status_code == 200
    for _ in range(2):
        constrained = submit(client, function_dict, "team-again", "allow")
        assert constrained["attempts"][0]["preemption_mode"] == "constrain"
        assert constrained["function"]["spec"]["preemption_mode"] == "constrain"
        client.post(f"/api/v1/runs/{constrained['uid']}/abort", headers=USER)
    assert client.delete("/api/v1/projects/team-again/budget", headers=ADMIN).status_code in (
        200,
        204,
    )
    free = submit(client, function_dict, "team-again", "allow")
    assert free["attempts"][0]["preemption_mode"] == "allow"
    assert free["function"]["spec"]["preemption_mode"] == "allow"
    done = wait_state(client, free["uid"], {"completed", "error", "aborted"})
    assert done["state"] == "completed", done


def test_a_deleted_projects_budget_goes_with_it(client) -> None:
    make_project(client, "team-gone")
    assert put_budget(client, "team-gone", amount=50).status_code == 200
    assert client.delete("/api/v1/projects/team-gone", headers=USER).status_code == 204
    make_project(client, "team-gone")
    assert client.get("/api/v1/projects/team-gone/budget", headers=USER).json()["budget"] is None


def test_a_held_run_released_as_spot_only_is_recorded_spot_only(
    server, client, function_dict
) -> None:
    """What it runs as is in its record, so a relaunch (after a restart) keeps it on spot."""
    make_project(client, "team-h")
    assert put_budget(client, "team-h", amount=0, action="hold").status_code == 200
    held = submit(client, function_dict, "team-h", "allow")
    assert (held["state"], held["reason"]) == ("pending", "Budget")
    assert put_budget(client, "team-h", amount=0, action="spot-only").status_code == 200
    deadline = time.monotonic() + 30  # the change releases it at once
    while (released := client.get(f"/api/v1/runs/{held['uid']}", headers=USER).json())[
        "reason"
    ] == "Budget":
        assert time.monotonic() < deadline, released
        time.sleep(0.05)
    assert released["attempts"][0]["preemption_mode"] == "constrain"
    record = server.runs.store.get(held["uid"])
    assert record.function["spec"]["preemption_mode"] == "constrain"
    client.post(f"/api/v1/runs/{held['uid']}/abort", headers=USER)


def test_held_runs_start_when_the_period_rolls_over(server, client, function_dict) -> None:
    priced(server)
    make_project(client, "rolling")
    end_of_march = utc(2026, 3, 31, 23, 30)
    server.runs.budgets.clock = lambda: end_of_march
    spend(server, "rolling", utc(2026, 3, 31, 20), utc(2026, 3, 31, 23))  # 3 of 2
    assert put_budget(client, "rolling", amount=2, action="hold").status_code == 200
    held = submit(client, function_dict, "rolling")
    assert held["status_text"] == "budget: project rolling spent 3.00 of 2 this month"
    assert server.runs.release_held() == []
    server.runs.budgets.clock = lambda: utc(2026, 4, 1, 0, 5)  # April: nothing spent yet
    # This call launches it, or the monitor's own look (every few seconds) did just before.
    assert server.runs.release_held() in ([held["uid"]], [])
    done = wait_state(client, held["uid"], {"completed", "error", "aborted"})
    assert done["state"] == "completed", done
    assert server.runs.release_held() == []


def test_a_database_with_projects_and_runs_upgrades_to_budgets(empty_database) -> None:
    from runplane.service.budgets import Budgets, check_budget
    from runplane.service.db import connect
    from runplane.service.records import RunStore

    older_database(
        empty_database, "0010", projects={"kept": ""}, runs=[run_row(1.0, project="kept")]
    )
    engine = connect(empty_database)  # upgrades to the newest migration
    budgets = Budgets(engine, lambda: None)  # type: ignore[arg-type,return-value]
    assert budgets.all() == {}
    budgets.set(check_budget("kept", {"amount": 5, "action": "hold"}), "alice")
    assert budgets.get("kept") is not None
    assert [r.project for r in RunStore(engine).list_runs(project="kept")] == ["kept"]
    engine.dispose()


def test_a_read_overtaken_by_a_change_is_not_kept(server, client, monkeypatch) -> None:
    """A read of the budgets that began before an admin's change must not be kept as fresh: the
    change would go unseen for as long as the read is kept."""
    make_project(client, "racer")
    assert put_budget(client, "racer", amount=5).status_code == 200
    budgets = server.runs.budgets
    sessions = budgets._sessions
    overtaken: list[bool] = []

    class ReadThenCleared:
        """Sessions as the budgets' own, but the budget is dropped after the first read ends,
        before what it read is kept."""

        begin = sessions.begin

        @contextlib.contextmanager
        def __call__(self) -> Iterator[Any]:
            with sessions() as session:
                yield session
            if not overtaken:
                overtaken.append(True)
                budgets.clear("racer")

    budgets.clear("other")  # forget what was read
    monkeypatch.setattr(budgets, "_sessions", ReadThenCleared())
    budgets.all()
    assert overtaken == [True]
    assert budgets.get("racer") is None

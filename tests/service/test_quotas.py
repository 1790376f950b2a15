"""Project quotas through the API: admins set and clear them, users read them and are refused
changing them, bad input is refused by field, runs beyond a quota wait saying why, and a
database with data upgrades to the table that holds them."""

from __future__ import annotations

import time

from tests.service.conftest import ADMIN, USER, wait_state
from tests.service.older_databases import older_database

HOLD = (
    "import pathlib, time\n"
    "def handler(context, gate: str = ''):\n"
    "    while gate and not pathlib.Path(gate).exists():\n"
    "        time.sleep(0.05)\n"
)
QUOTAS = "/api/v1/projects/team-a/quotas"


def _project(client, name="team-a"):
    made = client.post("/api/v1/projects", json={"name": name}, headers=USER)
    assert made.status_code == 201, made.text


def test_admins_set_and_clear_quotas_and_users_read_them(client):
    _project(client)
    assert client.get(QUOTAS, headers=USER).json() == {"project": "team-a", "flavors": {}}
    body = {"cpu": "16", "memory": "64Gi", "gpus": {"nominal": 2, "borrowing_limit": 0}}
    refused = client.put(f"{QUOTAS}/on-demand", json=body, headers=USER)  # its owner, too
    assert refused.status_code == 403
    assert "user 'bob' may read project 'team-a''s quota but not change it" in refused.text
    assert client.delete(QUOTAS, headers=USER).status_code == 403

    done = client.put(f"{QUOTAS}/on-demand", json=body, headers=ADMIN)
    assert done.status_code == 200, done.text
    assert client.put(f"{QUOTAS}/spot", json={"cpu": "4"}, headers=ADMIN).status_code == 200
    shown = client.get(QUOTAS, headers=USER).json()["flavors"]
    assert shown["on-demand"] == {
        "cpu": {"nominal": "16", "borrowing_limit": None, "lending_limit": None, "used": "0"},
        "memory": {
            "nominal": "64Gi",
            "borrowing_limit": None,
            "lending_limit": None,
            "used": "0",
        },
        "gpus": {"nominal": "2", "borrowing_limit": "0", "lending_limit": None, "used": "0"},
    }
    cleared = client.delete(f"{QUOTAS}/spot", headers=ADMIN).json()["flavors"]
    assert list(cleared) == ["on-demand"]
    assert client.delete(QUOTAS, headers=ADMIN).json()["flavors"] == {}


def test_kueue_gets_each_flavors_nominal_quota_by_its_resource_names(client, server):
    _project(client)
    body = {"cpu": "16", "memory": "64Gi", "gpus": 2}
    assert client.put(f"{QUOTAS}/on-demand", json=body, headers=ADMIN).status_code == 200
    assert server.runs.quotas.kueue_quotas("team-a") == {
        "on-demand": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}
    }
    seen = []
    server.runs.quotas.on_change = seen.append
    assert client.delete(QUOTAS, headers=ADMIN).status_code == 200
    assert seen == [{}]  # every change is handed on: the runtime, or Kueue's queues


def test_bad_quotas_are_refused_by_field_and_nothing_is_stored(client):
    _project(client)
    cases = [
        ("on-demand", {"cpu": "١٦"}, "quotas.on-demand.cpu.nominal"),
        ("on-demand", {"cpu": "4", "memory": "1g"}, "quotas.on-demand.memory.nominal"),
        ("on-demand", {"gpus": "0.5"}, "quotas.on-demand.gpus.nominal"),
        ("on-demand", {"disk": "1"}, "quotas.on-demand"),
        (
            "on-demand",
            {"cpu": {"nominal": "1", "lending_limit": "2"}},
            "quotas.on-demand.cpu.lending_limit",
        ),
        ("reserved", {"cpu": "1"}, "flavor"),
    ]
    for flavor, body, field in cases:
        refused = client.put(f"{QUOTAS}/{flavor}", json=body, headers=ADMIN)
        assert refused.status_code == 422, refused.text
        detail = refused.json()
        assert field in str(detail), (field, detail)
        assert "example" in str(detail), detail
    assert client.get(QUOTAS, headers=USER).json()["flavors"] == {}
    missing = client.put(
        "/api/v1/projects/nobody/quotas/on-demand", json={"cpu": "1"}, headers=ADMIN
    )
    assert missing.status_code == 404


def test_a_run_beyond_its_projects_quota_waits_saying_why(client, server, function_dict, tmp_path):
    _project(client)
    quota = {"cpu": {"nominal": "100m", "borrowing_limit": "0"}}
    assert client.put(f"{QUOTAS}/on-demand", json=quota, headers=ADMIN).status_code == 200
    function = function_dict(HOLD)
    function["metadata"]["project"] = "team-a"
    gate = tmp_path / "gate"
    uids = []
    for _ in range(2):
        made = client.post(
            "/api/v1/runs", json={"function": function, "params": {"gate": str(gate)}}, headers=USER
        )
        assert made.status_code == 201, made.text
        uids.append(made.json()["uid"])
    wait_state(client, uids[0], {"running"})
    deadline = time.monotonic() + 30
    while True:
        run = client.get(f"/api/v1/runs/{uids[1]}", headers=USER).json()
        if run["status_text"].startswith("waiting for quota"):
            break
        assert time.monotonic() < deadline, run["status_text"]
        time.sleep(0.05)
    assert run["state"] == "pending"
    assert run["reason"] == "WaitingForQuota"
    assert run["status_text"] == (
        "waiting for quota: project team-a needs 0.1 CPUs more on on-demand; no run ahead of it"
    )
    used = client.get(QUOTAS, headers=USER).json()["flavors"]["on-demand"]["cpu"]["used"]
    assert used == "0.1"
    gate.touch()
    for uid in uids:
        assert wait_state(client, uid, {"completed"}, timeout=60)["state"] == "completed"


def test_a_database_with_projects_upgrades_to_quotas(empty_database):
    from runplane.service.db import connect
    from runplane.service.projects import ProjectStore
    from runplane.service.quotas import QuotaStore

    older_database(empty_database, "0010", projects={"kept": "old"})
    engine = connect(empty_database)  # upgrades to the newest migration
    assert ProjectStore(engine).get("kept").description == "old"
    quotas = QuotaStore(engine)
    assert quotas.table() == {}
    quotas.set_flavor("kept", "spot", {"cpu": "2"}, "alice", admin=True)
    assert quotas.kueue_quotas("kept") == {"spot": {"cpu": "2"}}
    engine.dispose()


def test_a_change_handed_on_after_an_older_table_is_handed_on_again(empty_database):
    """Two processes change quotas at once: the one that hands its table on last reads the
    store again after, so the table the machine keeps is never an older one."""
    from runplane.service.db import connect
    from runplane.service.quotas import QuotaStore

    older_database(empty_database, "0010", projects={"team-a": "", "team-b": ""})
    engine = connect(empty_database)
    handed: list[set[str]] = []
    theirs = QuotaStore(engine, lambda table: handed.append(set(table)))
    stale: list[set[str]] = []

    def ours_hands(table):
        if not stale:  # the other process commits its change, hands it on, then ours lands
            stale.append(set(table))
            theirs.set_flavor("team-b", "on-demand", {"cpu": "1"}, "root", admin=True)
        handed.append(set(table))

    ours = QuotaStore(engine, ours_hands)
    ours.set_flavor("team-a", "on-demand", {"cpu": "1"}, "root", admin=True)
    assert stale == [{"team-a"}]
    assert handed[-1] == {"team-a", "team-b"}, "the table handed on last is the stored one"
    engine.dispose()

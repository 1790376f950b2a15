"""Projects as records of the service: created, read, changed and deleted through the API,
on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.service.conftest import ADMIN, OTHER_USER, USER, wait_state

API = "/api/v1"


def test_create_is_get_or_create_and_the_creator_owns_it(client):
    body = {
        "name": "churn",
        "description": "churn models",
        "params": {"label_column": "label", "lr": 0.1},
        "default_image": "python:3.11",
        "labels": {"team": "growth"},
    }
    made = client.post(f"{API}/projects", headers=USER, json=body)
    assert made.status_code == 201, made.text
    record = made.json()
    assert record["owner"] == "bob"
    assert record["recorded"] is True
    assert record["params"] == {"label_column": "label", "lr": 0.1}
    assert record["created_at"] == record["updated_at"]

    again = client.post(f"{API}/projects", headers=OTHER_USER, json={"name": "churn"})
    assert again.status_code == 200  # the existing record, unchanged, whoever asks
    assert again.json() == record
    assert client.get(f"{API}/projects/churn", headers=OTHER_USER).json() == record


def test_the_list_has_records_and_projects_that_only_have_runs(client, function_dict):
    client.post(f"{API}/projects", headers=USER, json={"name": "empty", "description": "d"})
    fn = function_dict()
    fn["metadata"]["project"] = "adhoc"
    run = client.post(f"{API}/runs", headers=USER, json={"function": fn}).json()
    wait_state(client, run["uid"], {"completed"})

    names = client.get(f"{API}/projects", headers=USER).json()
    assert names == ["adhoc", "empty"]  # names, as before records existed
    full = {p["name"]: p for p in client.get(f"{API}/projects?format=full", headers=USER).json()}
    assert full["empty"]["description"] == "d"
    assert full["empty"]["recorded"] is True
    assert full["adhoc"]["recorded"] is False
    assert full["adhoc"]["owner"] == ""
    assert client.get(f"{API}/projects/adhoc", headers=USER).json()["recorded"] is False
    missing = client.get(f"{API}/projects/nowhere", headers=USER)
    assert missing.status_code == 404
    assert "project 'nowhere' does not exist" in missing.json()["message"]


def test_only_the_owner_or_an_admin_changes_a_project(client):
    client.post(f"{API}/projects", headers=USER, json={"name": "churn"})
    patch = {"description": "v2", "params": {"lr": 0.2}}
    refused = client.patch(f"{API}/projects/churn", headers=OTHER_USER, json=patch)
    assert refused.status_code == 403
    assert "carol" in refused.json()["message"]
    assert "bob" not in refused.json()["message"]

    changed = client.patch(f"{API}/projects/churn", headers=USER, json=patch).json()
    assert changed["description"] == "v2"
    assert changed["params"] == {"lr": 0.2}
    assert changed["updated_at"] >= changed["created_at"]
    by_admin = client.patch(f"{API}/projects/churn", headers=ADMIN, json={"labels": {"a": "b"}})
    assert by_admin.json()["labels"] == {"a": "b"}
    assert by_admin.json()["description"] == "v2"
    assert client.patch(f"{API}/projects/none", headers=USER, json=patch).status_code == 404


def test_bad_projects_are_refused_naming_the_field(client):
    cases = [
        ({"name": "Bad_Name"}, "name"),
        ({"name": "x" * 64}, "name"),
        ({"name": "ok", "owner": "mallory"}, "owner"),
        ({"name": "ok", "description": "d" * 5000}, "description"),
        ({"name": "ok", "labels": {"bad key!": "v"}}, "labels"),
        ({"name": "ok", "params": {"big": "x" * (70 << 10)}}, "params"),
    ]
    for body, field in cases:
        answer = client.post(f"{API}/projects", headers=USER, json=body)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.json()["message"].startswith(field) or answer.json()["field"].startswith(
            field
        ), answer.json()
    assert client.get(f"{API}/projects", headers=USER).json() == []


def test_delete_refuses_a_project_in_use_unless_cascading(client, function_dict):
    client.post(f"{API}/projects", headers=USER, json={"name": "churn"})
    fn = function_dict(name="trainer")
    fn["metadata"]["project"] = "churn"
    assert client.post(f"{API}/functions", headers=USER, json=fn).status_code == 201
    schedule = {"function": fn, "schedule": "0 0 1 1 *"}
    assert client.post(f"{API}/schedules", headers=USER, json=schedule).status_code == 201

    assert client.delete(f"{API}/projects/churn", headers=OTHER_USER).status_code == 403
    refused = client.delete(f"{API}/projects/churn", headers=USER)
    assert refused.status_code == 409
    message = refused.json()["message"]
    assert "1 stored functions, 1 schedules" in message
    assert "cascading" in message

    gone = client.delete(f"{API}/projects/churn?deletion_strategy=cascading", headers=USER)
    assert gone.status_code == 204
    assert client.get(f"{API}/projects/churn", headers=USER).status_code == 404
    assert client.get(f"{API}/projects/churn/functions", headers=USER).json() == []
    assert client.get(f"{API}/schedules", headers=USER).json() == []


def test_cascading_never_deletes_what_other_users_stored(client, function_dict):
    client.post(f"{API}/projects", headers=USER, json={"name": "shared"})
    fn = function_dict(name="theirs")
    fn["metadata"]["project"] = "shared"
    client.post(f"{API}/functions", headers=OTHER_USER, json=fn)
    refused = client.delete(f"{API}/projects/shared?deletion_strategy=cascading", headers=USER)
    assert refused.status_code == 403
    assert len(client.get(f"{API}/projects/shared/functions", headers=USER).json()) == 1
    by_admin = client.delete(f"{API}/projects/shared?deletion_strategy=cascading", headers=ADMIN)
    assert by_admin.status_code == 204


def test_an_empty_project_is_deleted_and_run_records_stay_with_cascading(client, function_dict):
    client.post(f"{API}/projects", headers=USER, json={"name": "empty"})
    assert client.delete(f"{API}/projects/empty", headers=USER).status_code == 204
    assert client.delete(f"{API}/projects/empty", headers=USER).status_code == 404

    client.post(f"{API}/projects", headers=USER, json={"name": "ran"})
    fn = function_dict()
    fn["metadata"]["project"] = "ran"
    run = client.post(f"{API}/runs", headers=USER, json={"function": fn}).json()
    wait_state(client, run["uid"], {"completed"})
    assert "1 runs" in client.delete(f"{API}/projects/ran", headers=USER).json()["message"]
    strategy = client.delete(f"{API}/projects/ran?deletion_strategy=everything", headers=USER)
    assert strategy.status_code == 422
    assert strategy.json()["field"] == "deletion_strategy"
    client.delete(f"{API}/projects/ran?deletion_strategy=cascading", headers=USER)
    remaining = client.get(f"{API}/projects/ran", headers=USER).json()
    assert remaining["recorded"] is False  # its runs still name it
    assert client.get(f"{API}/runs/{run['uid']}", headers=USER).json()["project"] == "ran"

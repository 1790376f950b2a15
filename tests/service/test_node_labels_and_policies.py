"""Admins label the embedded default's node and change the policies through the API; runs
placed from then on see both, and both outlive a restart."""

from __future__ import annotations

from runplane.config import load_settings
from runplane.service.api import create_app
from runplane.service.server import Server

from .conftest import ADMIN, USER, wait_state

POOL = "runplane.io/pool"


def node_name(client) -> str:
    (node,) = client.get("/api/v1/cluster", headers=USER).json()["nodes"]
    return str(node["name"])


def test_admins_set_and_remove_node_labels_users_are_refused(client):
    name = node_name(client)
    path = f"/api/v1/cluster/nodes/{name}"
    refused = client.patch(path, headers=USER, json={"labels": {POOL: "training"}})
    assert refused.status_code == 403
    assert refused.json()["message"] == "user 'bob' may not label nodes; only admins may"

    labelled = client.patch(path, headers=ADMIN, json={"labels": {POOL: "training"}})
    assert labelled.status_code == 200, labelled.text
    assert labelled.json()["labels"][POOL] == "training"
    (node,) = client.get("/api/v1/cluster", headers=USER).json()["nodes"]
    assert node["labels"][POOL] == "training"
    assert node["labels"]["kubernetes.io/hostname"] == name  # the others stay

    removed = client.patch(path, headers=ADMIN, json={"labels": {POOL: None}})
    assert POOL not in removed.json()["labels"]
    assert POOL not in client.get("/api/v1/cluster", headers=USER).json()["nodes"][0]["labels"]


def test_bad_label_changes_are_4xx_naming_the_field(client):
    path = f"/api/v1/cluster/nodes/{node_name(client)}"
    cases = [
        ({"labels": {"bad key!": "x"}}, 422, "labels key", "a label key is"),
        ({"labels": {POOL: "-x-"}}, 422, f"labels[{POOL!r}]", "a label value is at most 63"),
        ({"labels": {POOL: "v" * 64}}, 422, f"labels[{POOL!r}]", "at most 63 characters"),
        ({"labels": {"kubernetes.io/hostname": "elsewhere"}}, 422, "labels key", "kubernetes.io/"),
        ({"labels": {}}, 422, "labels", "a mapping of label keys"),
        ({"labels": {POOL: 3}}, 422, "labels.runplane.io/pool", "valid string"),
        ({"labels": {POOL: "x"}, "taints": []}, 422, "taints", "Extra inputs"),
    ]
    for body, status, field, words in cases:
        answer = client.patch(path, headers=ADMIN, json=body)
        assert answer.status_code == status, (body, answer.text)
        assert answer.json()["field"] == field, (body, answer.json())
        assert words in answer.json()["message"], (body, answer.json())
    missing = client.patch("/api/v1/cluster/nodes/elsewhere", headers=ADMIN, json=cases[0][0])
    assert missing.status_code == 422  # the labels are checked before the node is looked up
    missing = client.patch(
        "/api/v1/cluster/nodes/elsewhere", headers=ADMIN, json={"labels": {POOL: "x"}}
    )
    assert missing.status_code == 404
    assert "the embedded default has one node" in missing.json()["message"]
    assert client.patch("/api/v1/cluster/nodes/UP", headers=ADMIN, json={}).status_code == 422


def test_a_run_selecting_a_new_label_starts_once_the_node_has_it(client, function_dict):
    fn = function_dict()
    fn["spec"]["node_selector"] = {POOL: "gpu"}
    uid = client.post("/api/v1/runs", headers=USER, json={"function": fn}).json()["uid"]
    waiting = wait_state(client, uid, {"pending"})
    assert "This run can never start here" in waiting["status_text"], waiting["status_text"]
    name = node_name(client)
    client.patch(f"/api/v1/cluster/nodes/{name}", headers=ADMIN, json={"labels": {POOL: "gpu"}})
    assert wait_state(client, uid, {"completed", "error"})["state"] == "completed", waiting
    # A later run on the label is placed at once.
    again = client.post("/api/v1/runs", headers=USER, json={"function": fn}).json()["uid"]
    assert wait_state(client, again, {"completed", "error"})["state"] == "completed"


def test_node_labels_outlive_a_restart(server, client):
    name = node_name(client)
    client.patch(f"/api/v1/cluster/nodes/{name}", headers=ADMIN, json={"labels": {POOL: "a"}})
    server.close()
    restarted = Server(load_settings())
    try:
        again = create_app(restarted)
        from fastapi.testclient import TestClient

        (node,) = TestClient(again).get("/api/v1/cluster", headers=USER).json()["nodes"]
        assert node["labels"][POOL] == "a"
    finally:
        restarted.close()


def test_policies_read_by_all_changed_by_admins_and_applied_to_new_runs(client, function_dict):
    policies = client.get("/api/v1/defaults", headers=USER).json()["policies"]
    assert policies["allowed_priority_classes"] == ["low", "medium", "high"]
    assert policies["priority_class_roles"] == {"high": ["admin"]}
    assert policies["reserved_node_groups"][0]["name"] == "system"
    narrow = {"policies": {"allowed_priority_classes": ["medium", "high"]}}
    refused = client.patch("/api/v1/defaults", headers=USER, json=narrow)
    assert refused.status_code == 403
    assert "only admins may" in refused.json()["message"]

    changed = client.patch("/api/v1/defaults", headers=ADMIN, json=narrow)
    assert changed.status_code == 200, changed.text
    assert changed.json()["policies"]["allowed_priority_classes"] == ["medium", "high"]
    low = function_dict()
    low["spec"]["priority_class_name"] = "low"
    answer = client.post("/api/v1/runs", headers=USER, json={"function": low})
    assert answer.status_code == 422
    assert answer.json()["field"] == "priority_class_name"
    assert "valid priority classes are medium, high" in answer.json()["message"]

    opened = {"policies": {"priority_class_roles": {"high": ["admin", "user"]}}}
    assert client.patch("/api/v1/defaults", headers=ADMIN, json=opened).status_code == 200
    high = function_dict()
    high["spec"]["priority_class_name"] = "high"
    assert client.post("/api/v1/runs", headers=USER, json={"function": high}).status_code == 201

    group = {"name": "gpu", "node_selector": {POOL: "gpu"}, "reason": "kept for serving"}
    reserve = {"policies": {"reserved_node_groups": [group]}}
    assert client.patch("/api/v1/defaults", headers=ADMIN, json=reserve).status_code == 200
    on_gpu = function_dict()
    on_gpu["spec"]["node_selector"] = {POOL: "gpu"}
    refused_run = client.post("/api/v1/runs", headers=USER, json={"function": on_gpu})
    assert refused_run.status_code == 403
    assert "node group 'gpu', which is kept for serving" in refused_run.json()["message"]

    back = client.patch("/api/v1/defaults", headers=ADMIN, json={"policies": None})
    assert back.json()["policies"] == policies
    assert client.post("/api/v1/runs", headers=USER, json={"function": on_gpu}).status_code == 201


def test_bad_policies_are_refused_whole_naming_the_field(client):
    before = client.get("/api/v1/defaults", headers=USER).json()
    cases = [
        (
            {"allowed_priority_classes": ["low", "urgent"]},
            "policies.allowed_priority_classes",
            "a priority class the service is configured with: low, medium, high",
        ),
        (
            {"allowed_priority_classes": ["runplane-system"]},
            "policies.allowed_priority_classes",
            "configured with",
        ),
        ({"allowed_priority_classes": []}, "policies.allowed_priority_classes", "at least 1"),
        (
            {"allowed_priority_classes": ["low", "high"]},
            "policies.allowed_priority_classes",
            "the default priority class 'medium' must stay allowed",
        ),
        (
            {"priority_class_roles": {"medium": ["admin"]}},
            "policies.priority_class_roles",
            "must stay open to every role",
        ),
        (
            {"priority_class_roles": {"high": ["root"]}},
            "policies.priority_class_roles.high.0",
            "'admin' or 'user'",
        ),
        (
            {"priority_class_roles": {"urgent": ["admin"]}},
            "policies.priority_class_roles",
            "configured with",
        ),
        (
            {"reserved_node_groups": [{"name": "GPU", "node_selector": {POOL: "gpu"}}]},
            "policies.reserved_node_groups[0].name",
            "lower-case",
        ),
        (
            {"reserved_node_groups": [{"name": "gpu", "node_selector": {}}]},
            "policies.reserved_node_groups[0].node_selector",
            "at least one",
        ),
        (
            {"reserved_node_groups": [{"name": "gpu", "node_selector": {"bad key!": "x"}}]},
            "policies.reserved_node_groups[0].node_selector key",
            "a label key",
        ),
        (
            {"reserved_node_groups": [{"name": "gpu"}]},
            "policies.reserved_node_groups.0.node_selector",
            "Field required",
        ),
        ({"reserve": []}, "policies.reserve", "Extra inputs"),
    ]
    for change, field, words in cases:
        answer = client.patch("/api/v1/defaults", headers=ADMIN, json={"policies": change})
        assert answer.status_code == 422, (change, answer.text)
        assert answer.json()["field"] == field, (change, answer.json())
        assert words in answer.json()["message"], (change, answer.json())
    not_a_mapping = client.patch("/api/v1/defaults", headers=ADMIN, json={"policies": ["low"]})
    assert not_a_mapping.json()["field"] == "policies"
    # A default class a policy forbids is refused too, from the defaults' side.
    narrow = {"policies": {"allowed_priority_classes": ["medium"]}}
    assert client.patch("/api/v1/defaults", headers=ADMIN, json=narrow).status_code == 200
    low = client.patch("/api/v1/defaults", headers=ADMIN, json={"priority_class": "low"})
    assert low.status_code == 422
    client.patch("/api/v1/defaults", headers=ADMIN, json={"policies": None})
    assert client.get("/api/v1/defaults", headers=USER).json() == before


def test_policies_outlive_a_restart(server, client):
    narrow = {"policies": {"allowed_priority_classes": ["low", "medium"]}}
    assert client.patch("/api/v1/defaults", headers=ADMIN, json=narrow).status_code == 200
    server.close()
    restarted = Server(load_settings())
    try:
        assert restarted.settings.priority_classes.valid == ["low", "medium"]
    finally:
        restarted.close()

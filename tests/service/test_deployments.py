"""Serving deployments through the service's API: list, get, invoke and delete, each only by
the user who deployed it (or an admin), on the service's local runtime (its replicas run on the
service's machine), over SQLite and PostgreSQL as every service test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from runplane.service.server import Server
from tests.service.conftest import ADMIN, OTHER_USER, USER

ECHO = (
    "def handler(context, event):\n"
    "    if event.path.endswith('/missing'):\n"
    "        return 404, {'error': 'no such thing'}\n"
    "    body = event.body.decode() if isinstance(event.body, bytes) else event.body\n"
    "    return {'path': event.path, 'method': event.method, 'body': body,\n"
    "            'query': dict(event.fields)}\n"
)
BASE = "/api/v1/deployments"


@pytest.fixture
def deployed(
    client: TestClient, server: Server, function_dict: Callable[..., dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    serving = function_dict(code=ECHO, name="echo")
    serving["kind"] = "serving"
    answer = client.post(BASE, headers=USER, json={"function": serving})
    assert answer.status_code == 201, answer.text
    yield serving
    for found in server.runs.runtime.deployments():
        server.runs.runtime.delete_deployment(found["project"], found["name"])


def test_a_user_lists_and_reads_their_own_deployments(
    client: TestClient, deployed: dict[str, Any]
) -> None:
    (echo,) = client.get(BASE, headers=USER).json()
    assert (echo["project"], echo["name"], echo["owner"], echo["state"]) == (
        "default",
        "echo",
        "bob",
        "ready",
    )
    assert echo["url"].startswith("http://127.0.0.1:")
    assert client.get(f"{BASE}/default/echo", headers=USER).json()["name"] == "echo"
    assert client.get(BASE, headers=USER, params={"project": "other"}).json() == []
    assert client.get(BASE, headers=OTHER_USER).json() == []  # carol's: none
    assert [d["name"] for d in client.get(BASE, headers=ADMIN).json()] == ["echo"]


def test_invoke_answers_with_the_functions_answer_and_status(
    client: TestClient, deployed: dict[str, Any]
) -> None:
    answer = client.post(f"{BASE}/default/echo/invoke/predict?a=1", headers=USER, json={"x": 1})
    assert answer.status_code == 200
    assert answer.headers["X-Runplane-Function-Status"] == "200"
    assert answer.json() == {
        "path": "/predict",
        "method": "POST",
        "body": {"x": 1},
        "query": {"a": "1"},
    }
    got = client.get(f"{BASE}/default/echo/invoke/", headers=USER)
    assert (got.json()["method"], got.json()["path"], got.json()["body"]) == ("GET", "/", "")
    missing = client.post(f"{BASE}/default/echo/invoke/missing", headers=USER, json={})
    assert missing.status_code == 200  # the API answered; the function said 404
    assert missing.headers["X-Runplane-Function-Status"] == "404"
    assert missing.json() == {"error": "no such thing"}
    bad = client.post(
        f"{BASE}/default/echo/invoke/x",
        headers={**USER, "X-Runplane-Timeout": "forever"},
        json={},
    )
    assert bad.status_code == 422
    assert "X-Runplane-Timeout" in bad.json()["message"]


def test_another_user_can_neither_use_nor_replace_nor_delete_it(
    client: TestClient, deployed: dict[str, Any]
) -> None:
    for method, path in (
        ("GET", f"{BASE}/default/echo"),
        ("POST", f"{BASE}/default/echo/invoke/predict"),
        ("DELETE", f"{BASE}/default/echo"),
    ):
        refused = client.request(method, path, headers=OTHER_USER, json={})
        assert refused.status_code == 403, (method, path, refused.text)
        assert "belongs to another user" in refused.json()["message"]
    again = client.post(BASE, headers=OTHER_USER, json={"function": deployed})
    assert again.status_code == 403
    # An admin may act on it.
    admin = client.post(f"{BASE}/default/echo/invoke/p", headers=ADMIN, json={"x": 2})
    assert admin.headers["X-Runplane-Function-Status"] == "200"


def test_deleting_a_deployment_stops_it(client: TestClient, deployed: dict[str, Any]) -> None:
    deleted = client.delete(f"{BASE}/default/echo", headers=USER)
    assert deleted.status_code == 200
    assert deleted.json() == {"deleted": "default/echo"}
    assert client.get(BASE, headers=USER).json() == []
    gone = client.get(f"{BASE}/default/echo", headers=USER)
    assert gone.status_code == 404
    assert "deployment default/echo does not exist" in gone.json()["message"]
    assert client.post(f"{BASE}/default/echo/invoke/x", headers=USER).status_code == 404


def test_bad_names_are_refused(client: TestClient) -> None:
    assert client.get(f"{BASE}/Bad_Name/echo", headers=USER).status_code == 422
    assert client.delete(f"{BASE}/default/{'x' * 64}", headers=USER).status_code == 422
    assert client.get(f"{BASE}/default/echo/invoke/{'p' * 3000}", headers=USER).status_code == 422

"""``/api/v1/metrics``: the counts of work a run costs, and the process's own, for admins."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from .conftest import ADMIN, USER, wait_state


def samples(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


def test_admins_read_the_counts_users_are_refused(client):
    assert client.get("/api/v1/metrics").status_code == 401
    refused = client.get("/api/v1/metrics", headers=USER)
    assert refused.status_code == 403
    assert "admin" in refused.json()["message"]
    answer = client.get("/api/v1/metrics", headers=ADMIN)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    found = samples(answer.text)
    assert found["process_resident_memory_bytes{}"] > 0


def test_a_run_is_counted_in_sql_statements(client, function_dict):
    def statements() -> float:
        found = samples(client.get("/api/v1/metrics", headers=ADMIN).text)
        return sum(v for k, v in found.items() if k.startswith("runplane_sql_statements_total"))

    before = statements()
    uid = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()[
        "uid"
    ]
    wait_state(client, uid, {"completed"})
    assert statements() > before

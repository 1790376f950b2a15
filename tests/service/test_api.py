"""The service API: runs, functions, schedules, defaults, roles and policies, bad input."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from runplane.service.api import create_app
from runplane.service.guard import Gate
from runplane.service.schedules import fire_uid

from .conftest import ADMIN, OTHER_USER, USER, wait_state


def test_health_needs_no_token_but_everything_else_does(client):
    assert client.get("/api/v1/health").json()["status"] == "ok"
    denied = client.get("/api/v1/runs")
    assert denied.status_code == 401
    assert denied.json() == {
        "error": "HTTPError",
        "message": "a valid bearer token is required",
        "field": None,
    }
    assert client.get("/api/v1/runs", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_ready_needs_no_token_and_says_why_not(server, client, monkeypatch):
    assert client.get("/api/v1/ready").json() == {"status": "ready", "problems": []}
    engine = server._engine
    # A database that refuses connections, as one that went down does.
    monkeypatch.setattr(server, "_engine", create_engine("postgresql+psycopg://x@127.0.0.1:1/x"))
    down = client.get("/api/v1/ready")
    assert down.status_code == 503
    assert down.json() == {
        "status": "not ready",
        "problems": ["the database does not answer (OperationalError)"],
    }
    monkeypatch.setattr(server, "_engine", engine)
    # A runtime whose watch fails (a leader's, or a service's alone) takes it out of service.
    failing = "the pod watch is refused: HTTP 403"
    with monkeypatch.context() as patch:
        patch.setattr(server.runs.runtime, "watching", lambda: failing)
        blind = client.get("/api/v1/ready")
    assert blind.status_code == 503
    assert blind.json()["problems"] == [failing]
    with server._checking:  # a check still waiting for the database: no second one
        waiting = client.get("/api/v1/ready")
    assert waiting.status_code == 503
    assert waiting.json()["problems"] == [
        "the previous readiness check is still waiting for the database"
    ]
    server.close()
    stopped = client.get("/api/v1/ready")
    assert stopped.status_code == 503
    assert stopped.json()["problems"] == ["the recorder of runs' events stopped"]
    assert client.get("/api/v1/health").json()["status"] == "ok"  # alive all the same


def test_submit_run_wait_and_read_back(client, function_dict):
    created = client.post(
        "/api/v1/runs", headers=USER, json={"function": function_dict(), "params": {"x": "21"}}
    )
    assert created.status_code == 201, created.text
    uid = created.json()["uid"]
    run = wait_state(client, uid, {"completed", "error"})
    assert run["state"] == "completed"
    assert run["results"] == {"double": 42, "return": {"double": 42}}
    assert run["requests"] == {"cpu": "100m", "memory": "32Mi"}
    assert [e["state"] for e in client.get(f"/api/v1/runs/{uid}/events", headers=USER).json()] == [
        "created",
        "pending",
        "running",
        "completed",
    ]
    listed = client.get("/api/v1/runs", headers=USER, params={"state": "completed"}).json()
    assert [r["uid"] for r in listed] == [uid]
    assert client.get("/api/v1/runs", headers=USER, params={"project": "other"}).json() == []
    unknown = client.get("/api/v1/runs", headers=USER, params={"state": "finished"})
    assert unknown.status_code == 422
    assert unknown.json()["message"].startswith("state: 'finished' is not valid; run states are")
    usage = client.get(f"/api/v1/runs/{uid}/usage", headers=USER).json()
    assert usage == {
        "peak_memory_bytes": run["peak_memory_bytes"],
        "cpu_seconds": run["cpu_seconds"],
    }


def test_an_integer_beyond_64_bits_stays_that_integer_in_the_record(client, function_dict):
    big = 10**30 + 7
    created = client.post(
        "/api/v1/runs", headers=USER, json={"function": function_dict(), "params": {"x": big}}
    )
    assert created.status_code == 201, created.text
    run = wait_state(client, created.json()["uid"], {"completed", "error"})
    assert run["state"] == "completed"
    assert run["params"] == {"x": big}  # read back from the database, not as a float
    assert run["results"]["double"] == 2 * big  # what the handler took and returned


def test_logs_are_read_from_an_offset(client, function_dict):
    printer = function_dict(
        "def handler(context):\n    print('first line')\n    print('second line')\n",
        name="printer",
    )
    uid = client.post("/api/v1/runs", headers=USER, json={"function": printer}).json()["uid"]
    wait_state(client, uid, {"completed"})
    whole = client.get(f"/api/v1/runs/{uid}/logs", headers=USER)
    assert whole.content == b"first line\nsecond line\n"
    assert whole.headers["X-Runplane-Next-Offset"] == str(len(whole.content))
    rest = client.get(f"/api/v1/runs/{uid}/logs", headers=USER, params={"offset": 11})
    assert rest.content == b"second line\n"
    assert rest.headers["X-Runplane-Next-Offset"] == str(len(whole.content))
    assert (
        client.get(f"/api/v1/runs/{uid}/logs", headers=USER, params={"offset": -1}).status_code
        == 422
    )


def test_abort_is_idempotent_until_finished(client, function_dict):
    slow = function_dict("import time\ndef handler(context):\n    time.sleep(30)\n", name="slow")
    uid = client.post("/api/v1/runs", headers=USER, json={"function": slow}).json()["uid"]
    wait_state(client, uid, {"running"})
    assert client.post(f"/api/v1/runs/{uid}/abort", headers=USER).status_code == 200
    assert client.post(f"/api/v1/runs/{uid}/abort", headers=USER).status_code in (200, 409)
    assert wait_state(client, uid, {"aborted"})["state"] == "aborted"
    finished = client.post(f"/api/v1/runs/{uid}/abort", headers=USER)
    assert finished.status_code == 409
    assert finished.json()["message"] == (
        f"run {uid} already finished (aborted); only pending or running runs can be aborted"
    )


def test_stored_functions_and_versions(client, function_dict):
    first = client.post("/api/v1/functions", headers=USER, json=function_dict())
    assert first.status_code == 201
    same = client.post("/api/v1/functions", headers=USER, json=function_dict())
    assert same.json()["hash"] == first.json()["hash"]
    changed = function_dict("def handler(context, x: int = 1):\n    return {'triple': x * 3}\n")
    second = client.post("/api/v1/functions", headers=USER, json=changed).json()
    versions = client.get("/api/v1/projects/default/functions/job/versions", headers=USER).json()
    assert [v["hash"] for v in versions] == [second["hash"], first.json()["hash"]]
    latest = client.get("/api/v1/projects/default/functions/job", headers=USER).json()
    assert latest["hash"] == second["hash"]
    old = client.get(
        "/api/v1/projects/default/functions/job",
        headers=USER,
        params={"version": first.json()["hash"][:10]},
    ).json()
    assert old["hash"] == first.json()["hash"]
    assert client.get("/api/v1/projects", headers=USER).json() == ["default"]
    run = client.post(
        "/api/v1/runs", headers=USER, json={"project": "default", "name": "job", "params": {"x": 2}}
    ).json()
    assert wait_state(client, run["uid"], {"completed"})["results"]["triple"] == 6
    missing = client.get("/api/v1/projects/default/functions/nope", headers=USER)
    assert missing.status_code == 404
    assert missing.json()["message"] == "function 'default/nope' does not exist"


def test_policy_refusals_answer_403_with_the_reason(client, function_dict):
    reserved = function_dict()
    reserved["spec"]["node_selector"] = {"runplane.io/node-group": "system"}
    answer = client.post("/api/v1/runs", headers=USER, json={"function": reserved})
    assert answer.status_code == 403
    assert answer.json()["message"].startswith(
        "node_selector: runplane.io/node-group=system targets the node group 'system'"
    )
    high = function_dict()
    high["spec"]["priority_class_name"] = "high"
    forbidden = client.post("/api/v1/runs", headers=USER, json={"function": high})
    assert forbidden.status_code == 403
    assert forbidden.json()["message"] == (
        "priority_class_name: role 'user' may not use priority class 'high' (allowed roles: admin)"
    )
    allowed = client.post("/api/v1/runs", headers=ADMIN, json={"function": high})
    assert allowed.status_code == 201
    system = function_dict()
    system["spec"]["priority_class_name"] = "runplane-system"
    assert client.post("/api/v1/runs", headers=ADMIN, json={"function": system}).status_code == 403
    assert client.get("/api/v1/runs", headers=ADMIN).json()[0]["uid"] == allowed.json()["uid"]
    assert client.get("/api/v1/runs", headers=USER).json() == []  # an admin's run is not theirs


def test_defaults_read_for_all_changed_by_admins(client, function_dict):
    assert client.get("/api/v1/defaults", headers=USER).json()["preemption_mode"] == "prevent"
    refused = client.patch("/api/v1/defaults", headers=USER, json={"priority_class": "low"})
    assert refused.status_code == 403
    assert refused.json()["message"] == (
        "user 'bob' may not change service defaults; only admins may"
    )
    changed = client.patch(
        "/api/v1/defaults",
        headers=ADMIN,
        json={"priority_class": "low", "resources": {"limits": {"memory": "1Gi"}}},
    )
    assert changed.status_code == 200
    assert changed.json()["priority_class"] == "low"
    run = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()
    assert run["priority_class"] == "low"
    assert run["limits"] == {"memory": "1Gi"}
    bad = client.patch("/api/v1/defaults", headers=ADMIN, json={"preemption_mode": "sometimes"})
    assert bad.status_code == 422
    assert client.get("/api/v1/defaults", headers=USER).json()["preemption_mode"] == "prevent"


def test_bad_input_is_4xx_with_a_message(client, function_dict):
    cases = [
        ({"function": {"kind": "job"}}, 422, "function: {'kind': 'job'} is not valid"),
        (
            {
                "function": {
                    **function_dict(),
                    "spec": {"resources": {"requests": {"memory": "1g"}}},
                }
            },
            422,
            "spec.resources.requests.memory: '1g' is not valid",
        ),
        (
            {"function": function_dict(), "params": {"x": "many"}},
            422,
            "params['x']: 'many' is not valid; the handler expects int",
        ),
        (
            {"function": function_dict(), "state_thresholds": {"running": "soon"}},
            422,
            "run(state_thresholds=...)['running']: 'soon' is not valid",
        ),
        ({}, 422, "function: None is not valid; give an inline function"),
    ]
    for body, status, message in cases:
        answer = client.post("/api/v1/runs", headers=USER, json=body)
        assert answer.status_code == status, (body, answer.text)
        assert answer.json()["message"].startswith(message), answer.json()
    assert client.get("/api/v1/runs", headers=USER).json() == []
    assert client.post("/api/v1/runs", headers=USER, content=b"{not json").status_code == 422
    assert client.get("/api/v1/runs/zz", headers=USER).status_code == 422
    assert client.get("/api/v1/runs/0123456789abcdef", headers=USER).status_code == 404


def test_a_submission_at_the_gate_answers_as_the_route_would(server, client, function_dict):
    # POST /runs is answered at the gate (a lane) when its body is JSON; the same app without
    # the lane sends it through FastAPI's route. Each refusal, and a run, come back alike.
    route_app = create_app(server)
    (gate,) = [m for m in route_app.user_middleware if m.cls is Gate]
    gate.kwargs["lanes"] = {}
    route = TestClient(route_app)
    bodies = [
        {"function": {"kind": "job"}},
        {"function": function_dict(), "params": {"x": "many"}},
        {"function": function_dict(), "params": "not a dict"},
        {"function": function_dict(), "version": "v" * 65},
        {"project": "default", "name": "never-stored"},
        {"function": function_dict(), "secrets": 3},
        [{"function": function_dict()}],
        {},
    ]
    for body in bodies:
        at_gate = client.post("/api/v1/runs", headers=USER, json=body)
        through = route.post("/api/v1/runs", headers=USER, json=body)
        assert at_gate.status_code == through.status_code, (body, at_gate.text, through.text)
        assert at_gate.json() == through.json(), body
        assert at_gate.headers["content-type"] == through.headers["content-type"]
    assert client.get("/api/v1/runs", headers=USER).json() == []
    made = [
        c.post("/api/v1/runs", headers=USER, json={"function": function_dict()})
        for c in (client, route)
    ]
    assert [m.status_code for m in made] == [201, 201]
    assert made[0].json().keys() == made[1].json().keys()
    assert made[0].json()["owner"] == made[1].json()["owner"] == "bob"


def test_schedules_fire_once_per_due_time(client, server, function_dict):
    created = client.post(
        "/api/v1/schedules",
        headers=USER,
        json={"function": function_dict(), "schedule": "*/5 * * * *", "params": {"x": 4}},
    )
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert [s["id"] for s in client.get("/api/v1/schedules", headers=USER).json()] == [
        schedule["id"]
    ]
    later = schedule["last_fired_at"] + 600
    first = server.schedules.fire_due(later, server.fire)
    again = server.schedules.fire_due(later, server.fire)
    assert len(first) == 1
    assert again == []
    # A fire repeated after a crash (run started, last_fired_at not yet saved) starts nothing.
    assert server.fire(server.schedules.list_schedules()[0], first[0]) is False
    run = wait_state(client, first[0], {"completed"})
    assert run["results"]["double"] == 8
    assert client.delete(f"/api/v1/schedules/{schedule['id']}", headers=USER).status_code == 204
    assert client.get("/api/v1/schedules", headers=USER).json() == []
    bad = client.post(
        "/api/v1/schedules",
        headers=USER,
        json={"function": function_dict(), "schedule": "every day"},
    )
    assert bad.status_code == 422
    assert bad.json()["message"].startswith(
        "schedule: 'every day' is not valid; a schedule is a cron expression of five fields"
    )


def test_schedules_survive_a_restart_without_double_firing(server, function_dict, monkeypatch):
    record = server.schedules.create(
        project="default",
        name="job",
        cron="* * * * *",
        function=function_dict(),
        params={},
        state_thresholds={},
        user="bob",
        role="user",
    )
    now = record.last_fired_at + 120
    fired = server.schedules.fire_due(now, server.fire)
    from runplane.config import load_settings
    from runplane.service.server import Server

    server.close()
    restarted = Server(load_settings())
    try:
        assert restarted.schedules.fire_due(now, restarted.fire) == []
        assert len(fired) == 1
        assert restarted.runs.store.get(fired[0]).name == "job"
    finally:
        restarted.close()


def test_fire_uid_is_deterministic_per_schedule_and_due_time():
    assert fire_uid("s1", 60.0) == fire_uid("s1", 60.2)
    assert len({fire_uid("s1", 60), fire_uid("s1", 120), fire_uid("s2", 60)}) == 3


def test_cluster_summary(client):
    summary = client.get("/api/v1/cluster", headers=USER).json()
    assert summary["runtime"] == "local"
    assert summary["capabilities"] == {
        "gpus": False,
        "preemption": False,
        "node_labels": True,
        "deploy": True,
        "durable": False,
    }
    assert (summary["ready"], summary["message"]) == (True, "1 of 1 nodes take new pods")
    (node,) = summary["nodes"]
    assert (node["ready"], node["condition"]) == (True, "")
    assert node["allocatable"]["cpu"] == 2000
    assert node["free"]["cpu"] == 2000


def test_deploy_on_the_local_runtime_runs_replicas_on_the_service_machine(
    client, server, function_dict
):
    from runplane.runtimes.local import serving as local_serving

    serving = function_dict(code="def handler(context, event):\n    return {'ok': True}\n")
    serving["kind"] = "serving"
    try:
        answer = client.post("/api/v1/deployments", headers=USER, json={"function": serving})
        assert answer.status_code == 201, answer.text
        (applied,) = answer.json()["applied"]
        assert applied.startswith("Deployment/job: 1 replica(s) at http://127.0.0.1:")
    finally:
        local_serving.delete(server.settings, "job")
    job = client.post("/api/v1/deployments", headers=USER, json={"function": function_dict()})
    assert job.status_code == 422
    assert "only serving functions are deployed; jobs are run" in job.json()["message"]


def test_a_functions_suggestion_rests_on_the_callers_own_runs(client, function_dict):
    created = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()})
    assert created.status_code == 201, created.text
    assert wait_state(client, created.json()["uid"], {"completed", "error"})["state"] == (
        "completed"
    )
    path = "/api/v1/projects/default/functions/job/suggestion"
    answer = client.get(path, headers=USER)
    assert answer.status_code == 200, answer.text
    suggestion = answer.json()
    assert (suggestion["attempts"], suggestion["needed"], suggestion["enough"]) == (1, 3, False)
    assert suggestion["verdict"].startswith("too few runs: 1 of 3")
    assert (suggestion["requests"], suggestion["limits"], suggestion["call"]) == ({}, {}, "")
    assert suggestion["memory_bytes"]["count"] == 1
    assert client.get(path, headers=ADMIN).json()["attempts"] == 1  # an admin sees everyone's
    hidden = client.get(path, headers=OTHER_USER)  # another user's runs are not theirs to read
    assert hidden.status_code == 404
    assert hidden.json()["message"] == "no runs of default/job among the last 100"
    assert client.get(path, headers=USER, params={"runs": 0}).status_code == 422

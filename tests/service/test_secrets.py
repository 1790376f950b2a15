"""Which Secrets a run may reference: what its submitter's token grants, checked at submit for
every way a function names a Secret, through the HTTP API."""

from __future__ import annotations

import pytest

from runplane.service.auth import Tokens

from .conftest import ADMIN, OTHER_USER, USER, wait_state

# bob (USER) holds a token that grants no Secret, carol (OTHER_USER) one that grants
# team-a-*, alice (ADMIN) one that lists none and so grants every Secret.


def env_secret(name: str) -> dict:
    return {
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": name, "key": "token"}}}]
    }


def secret_volume(name: str) -> dict:
    return {
        "volumes": [{"name": "creds", "secret": {"secretName": name}}],
        "volume_mounts": [{"name": "creds", "mountPath": "/creds"}],
    }


def v3io_volume(name: str) -> dict:
    return {
        "volumes": [
            {
                "name": "v3io",
                "flexVolume": {"driver": "v3io/fuse", "secretRef": {"name": name}},
            }
        ],
        "volume_mounts": [{"name": "v3io", "mountPath": "/v3io"}],
    }


REFERENCES = [
    (env_secret, "spec.env[0].valueFrom.secretKeyRef.name"),
    (secret_volume, "spec.volumes[0].secret.secretName"),
    (v3io_volume, "spec.volumes[0].flexVolume.secretRef.name"),
]


def with_spec(function_dict, **spec) -> dict:
    fn = function_dict(name="reader")
    fn["spec"].update(spec)
    return fn


@pytest.mark.parametrize(("shape", "field"), REFERENCES, ids=[f for _, f in REFERENCES])
def test_a_secret_not_granted_is_refused_naming_field_and_secret(
    client, function_dict, shape, field
):
    fn = with_spec(function_dict, **shape("db-credentials"))
    for headers, user in ((USER, "bob"), (OTHER_USER, "carol")):
        for path, body in (
            ("/api/v1/runs", {"function": fn}),
            ("/api/v1/schedules", {"function": fn, "schedule": "@daily"}),
        ):
            answer = client.post(path, headers=headers, json=body)
            assert answer.status_code == 403, answer.text
            refused = answer.json()
            assert refused["field"] == field
            assert refused["message"].startswith(
                f"{field}: Secret 'db-credentials' is not granted to user {user!r}"
            )
    assert (
        "token's secrets: none"
        in client.post("/api/v1/runs", headers=USER, json={"function": fn}).json()["message"]
    )
    assert client.get("/api/v1/runs", headers=ADMIN).json() == []  # nothing was recorded
    assert client.get("/api/v1/schedules", headers=ADMIN).json() == []


def test_granted_secrets_reach_the_run(client, server, function_dict):
    store = server.settings.local.home / "secrets"
    for name in ("team-a-db", "db-credentials"):
        (store / name).mkdir(parents=True)
        (store / name / "token").write_text(f"value-of-{name}")
    code = "import os\ndef handler(context):\n    return {'token': os.environ['TOKEN']}\n"
    fn = function_dict(code, name="reader")

    def submit(headers: dict, secret: str) -> dict:
        fn["spec"].update(env_secret(secret))
        answer = client.post("/api/v1/runs", headers=headers, json={"function": fn})
        assert answer.status_code == 201, answer.text
        run = wait_state(client, answer.json()["uid"], {"completed", "error"}, headers=headers)
        assert run["state"] == "completed", run["status_text"]
        return {key: value for key, value in run["results"].items() if key != "return"}

    assert submit(OTHER_USER, "team-a-db") == {"token": "value-of-team-a-db"}  # team-a-*
    assert submit(ADMIN, "db-credentials") == {"token": "value-of-db-credentials"}  # all
    refused = client.post("/api/v1/runs", headers=OTHER_USER, json={"function": fn})
    assert refused.status_code == 403  # carol's glob does not reach db-credentials


def test_a_deployment_is_checked_too(client, function_dict):
    serving = with_spec(function_dict, **secret_volume("db-credentials"))
    serving["kind"] = "serving"
    answer = client.post("/api/v1/deployments", headers=USER, json={"function": serving})
    assert answer.status_code == 403
    assert answer.json()["field"] == "spec.volumes[0].secret.secretName"


@pytest.mark.parametrize(
    "spec",
    [
        {"env": [{"name": "A", "envFrom": [{"secretRef": {"name": "db-credentials"}}]}]},
        {"env_from": [{"secretRef": {"name": "db-credentials"}}]},
        {
            "volumes": [
                {
                    "name": "p",
                    "projected": {"sources": [{"secret": {"name": "db-credentials"}}]},
                }
            ],
            "volume_mounts": [{"name": "p", "mountPath": "/p"}],
        },
    ],
    ids=["envFrom-in-env", "env_from", "projected"],
)
def test_shapes_a_function_cannot_carry_are_refused_whole(client, function_dict, spec):
    answer = client.post(
        "/api/v1/runs", headers=ADMIN, json={"function": with_spec(function_dict, **spec)}
    )
    assert answer.status_code == 422, answer.text


def test_a_schedule_runs_with_the_grant_its_creator_holds_now(
    client, server, function_dict, caplog
):
    store = server.settings.local.home / "secrets" / "team-a-db"
    store.mkdir(parents=True)
    (store / "token").write_text("x")
    created = client.post(
        "/api/v1/schedules",
        headers=OTHER_USER,
        json={
            "function": with_spec(function_dict, **env_secret("team-a-db")),
            "schedule": "* * * * *",
        },
    )
    assert created.status_code == 201, created.text
    due = created.json()["last_fired_at"] + 120
    assert len(server.schedules.fire_due(due, server.fire)) == 1
    # The admin takes carol's grant back (a restart with new tokens): her schedule's next run
    # is refused.
    tokens = server.base_settings.service.tokens
    server.tokens = Tokens([t.model_copy(update={"secrets": []}) for t in tokens])
    assert server.schedules.fire_due(due + 120, server.fire) == []
    (said,) = [r for r in caplog.records if "was refused" in r.getMessage()]
    assert said.levelname == "WARNING"
    assert "Secret 'team-a-db' is not granted to user 'carol'" in said.getMessage()


def test_a_secret_value_that_is_no_text_is_a_clear_error(client, server, function_dict):
    store = server.settings.local.home / "secrets" / "binary"
    store.mkdir(parents=True)
    (store / "token").write_bytes(b"\xff\xfe-hunter2-\x00")
    (store / "nul").write_bytes(b"hunter2\x00hunter2")
    for key, problem in (("token", "is not UTF-8 text"), ("nul", "holds a NUL character")):
        fn = with_spec(function_dict, **env_secret("binary"))
        fn["spec"]["env"][0]["valueFrom"]["secretKeyRef"]["key"] = key
        answer = client.post("/api/v1/runs", headers=ADMIN, json={"function": fn})
        assert answer.status_code == 422, answer.text
        body = answer.json()
        assert body["field"] == "env TOKEN"
        assert f"secret 'binary' key {key!r} is not valid" in body["message"]
        assert problem in body["message"]
        assert "hunter2" not in body["message"]

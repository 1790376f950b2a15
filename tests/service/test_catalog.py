"""Stored functions shared safely: a name is its creator's, and versions are named exactly."""

from __future__ import annotations

from .conftest import ADMIN, OTHER_USER, USER

FUNCTIONS = "/api/v1/functions"
JOB = "/api/v1/projects/default/functions/job"


def test_a_function_name_belongs_to_its_creator(client, function_dict):
    first = client.post(FUNCTIONS, headers=USER, json=function_dict())
    assert first.status_code == 201
    changed = function_dict("def handler(context):\n    return {'taken': True}\n")
    refused = client.post(FUNCTIONS, headers=OTHER_USER, json=changed)
    assert refused.status_code == 403
    body = refused.json()
    assert body["field"] == "metadata.name"
    assert (
        "user 'carol' may store versions of and delete only their own functions"
        in (body["message"])
    )
    assert "bob" not in body["message"]  # the owner is not named to others
    same = client.post(FUNCTIONS, headers=OTHER_USER, json=function_dict())
    assert same.status_code == 403  # not even the same content: the name is not theirs
    assert client.delete(JOB, headers=OTHER_USER).status_code == 403
    versions = client.get(f"{JOB}/versions", headers=USER).json()
    assert [v["hash"] for v in versions] == [first.json()["hash"]]  # nothing was replaced

    # The same name in another project is another function.
    elsewhere = function_dict()
    elsewhere["metadata"]["project"] = "other"
    assert client.post(FUNCTIONS, headers=OTHER_USER, json=elsewhere).status_code == 201

    # The owner adds versions; an admin may act on any function.
    assert client.post(FUNCTIONS, headers=USER, json=changed).status_code == 201
    by_admin = function_dict("def handler(context):\n    return {'admin': True}\n")
    assert client.post(FUNCTIONS, headers=ADMIN, json=by_admin).status_code == 201
    assert len(client.get(f"{JOB}/versions", headers=USER).json()) == 3
    assert client.delete(JOB, headers=ADMIN).status_code == 204
    assert client.get(JOB, headers=USER).status_code == 404
    assert client.delete(JOB, headers=USER).status_code == 404

    # Deleted, the name is free again, for whoever stores it next.
    assert client.post(FUNCTIONS, headers=OTHER_USER, json=function_dict()).status_code == 201
    assert client.delete(JOB, headers=USER).status_code == 403
    assert client.delete(JOB, headers=OTHER_USER).status_code == 204


def test_versions_are_named_by_tag_or_an_unambiguous_hash_prefix(client, server, function_dict):
    from sqlalchemy import update

    from runplane.service.db.models import FunctionVersion

    hashes = [
        client.post(
            FUNCTIONS,
            headers=USER,
            json=function_dict(f"def handler(context):\n    return {{'v': {n}}}\n"),
        ).json()["hash"]
        for n in range(3)
    ]
    short = client.get(JOB, headers=USER, params={"version": hashes[0][:7]})
    assert short.status_code == 422
    assert short.json()["field"] == "version"
    assert "a hash prefix is at least 8 hex characters" in short.json()["message"]
    exact = client.get(JOB, headers=USER, params={"version": hashes[2][:8]})
    assert exact.json()["hash"] == hashes[2]

    # Two versions whose hashes start alike (made so here; with sha256 it takes luck): the
    # prefix they share is refused, saying how many versions it matches, showing no hash.
    forged = {index: "abcdef0123" + hashes[index][10:] for index in (0, 1)}
    with server.catalog._sessions.begin() as session:
        for index, value in forged.items():
            session.execute(
                update(FunctionVersion)
                .where(FunctionVersion.hash == hashes[index])
                .values(hash=value)
            )
    ambiguous = client.get(JOB, headers=USER, params={"version": "abcdef01"})
    assert ambiguous.status_code == 409
    body = ambiguous.json()
    assert body["field"] == "version"
    assert body["message"] == (
        "version: 'abcdef01' starts the hashes of 2 versions of default/job; give more of the hash"
    )
    run = client.post(
        "/api/v1/runs",
        headers=USER,
        json={"project": "default", "name": "job", "version": "abcdef01"},
    )
    assert run.status_code == 409
    longer = forged[1][:14]
    assert client.get(JOB, headers=USER, params={"version": longer}).json()["hash"] == forged[1]

    # A tag names the newest version so tagged, however short; an unknown one is not found.
    tagged = function_dict("def handler(context):\n    return {'tagged': 1}\n")
    tagged["metadata"]["tag"] = "abc"
    made = client.post(FUNCTIONS, headers=USER, json=tagged).json()
    assert client.get(JOB, headers=USER, params={"version": "abc"}).json()["hash"] == made["hash"]
    assert client.get(JOB, headers=USER, params={"version": "v9"}).status_code == 404


def test_the_version_just_stored_is_the_latest_even_when_an_older_one_had_its_content(
    client, function_dict
):
    first = client.post(FUNCTIONS, headers=USER, json=function_dict()).json()
    changed = function_dict("def handler(context):\n    return {'second': True}\n")
    second = client.post(FUNCTIONS, headers=USER, json=changed).json()
    again = client.post(FUNCTIONS, headers=USER, json=function_dict())
    assert again.status_code == 201
    assert again.json()["hash"] == first["hash"]
    assert client.get(JOB, headers=USER).json()["hash"] == first["hash"]
    versions = client.get(f"{JOB}/versions", headers=USER).json()
    assert [v["hash"] for v in versions] == [first["hash"], second["hash"]]  # no duplicate
    latest = client.get("/api/v1/projects/default/functions", headers=USER).json()
    assert [f["hash"] for f in latest if f["name"] == "job"] == [first["hash"]]

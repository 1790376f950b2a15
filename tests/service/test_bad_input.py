"""Bad input from a careless or hostile user: refused at the door with a 4xx naming the field
(API and web pages alike), and what an older version let through and stored still reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from runplane.service.api import create_app
from runplane.service.db.models import Run
from runplane.service.server import Server
from runplane.ui.app import mount
from runplane.ui.sessions import SESSION_COOKIE

from .conftest import ADMIN, USER, wait_state

LONE = "x\ud800y"
#: Digits of other scripts, which Python's int() and re's \d take and Kubernetes does not.
ARABIC_128 = "\u0661\u0662\u0668"
FULLWIDTH_256 = "\uff12\uff15\uff16"
FULLWIDTH_1 = "\uff11"


def post_text(client: TestClient, path: str, body: str) -> Any:
    return client.post(
        f"/api/v1{path}", headers={**USER, "Content-Type": "application/json"}, content=body
    )


def browser(server: Server, headers: dict[str, str]) -> TestClient:
    """The API with the web pages mounted, logged in to them as the holder of ``headers``."""
    app = create_app(server)
    mount(app, server)
    (ui_app,) = [route.app for route in app.routes if getattr(route, "path", "") == "/ui"]  # type: ignore[attr-defined]
    who = server.tokens.holder(headers["Authorization"].removeprefix("Bearer ").encode())
    assert who is not None
    client = TestClient(app)
    client.cookies.set(SESSION_COOKIE, ui_app.state.ui.sessions.login(who).id)
    return client


def csrf_of(client: TestClient, page: str) -> str:
    text = client.get(page).text
    marker = 'name="csrf" value="'
    assert marker in text, text[:2000]
    return text.split(marker, 1)[1].split('"', 1)[0]


# -- lone surrogates ----------------------------------------------------------------------------


#: Stands for the lone surrogate in a body built as a dict, replaced in its JSON text.
MARK = "@@lone@@"


def _labelled(fn: dict[str, Any]) -> dict[str, Any]:
    fn["metadata"]["labels"] = {"team": MARK}
    return fn


def _with_env(fn: dict[str, Any]) -> dict[str, Any]:
    fn["spec"]["env"] = [{"name": "GREETING", "value": MARK}]
    return fn


#: (where, the field named, the body's parts besides the function, the function changed).
SURROGATES: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]] = [
    ("params.x", {"params": {"x": MARK}}, lambda fn: fn),
    ("params.x[1].deep", {"params": {"x": [1, {"deep": MARK}]}}, lambda fn: fn),
    ("params.\\ud800", {"params": {MARK: 1}}, lambda fn: fn),
    ("inputs.data", {"inputs": {"data": MARK}}, lambda fn: fn),
    ("spec.env[0].value", {}, _with_env),
    ("metadata.labels.team", {}, _labelled),
]


#: Where each is sent: a stored function's body is the function alone (no parameters).
CASES = [
    pytest.param(path, field, parts, change, id=f"{path}-{field}")
    for path in ("/runs", "/schedules", "/functions")
    for field, parts, change in SURROGATES
    if not (path == "/functions" and parts)
]


@pytest.mark.parametrize(("path", "field", "parts", "change"), CASES)
def test_lone_surrogates_are_refused_at_the_door_naming_the_field(
    server, client, function_dict, path, field, parts, change
):
    function = change(function_dict())
    if path == "/functions":
        body: dict[str, Any] = function
    else:
        body = {"function": function, **parts}
        field = field if parts else f"function.{field}"
    if path == "/schedules":
        body["schedule"] = "@daily"
    answer = post_text(client, path, json.dumps(body).replace(f'"{MARK}"', '"\\ud800"'))
    assert answer.status_code == 422, answer.text
    refused = answer.json()
    assert refused["field"] == field, refused
    assert "lone UTF-16 surrogate" in refused["message"]
    assert server.runs.list_runs(limit=10) == []  # nothing was recorded
    assert client.get("/api/v1/runs", headers=ADMIN).status_code == 200
    assert client.get("/api/v1/projects/default/functions", headers=ADMIN).json() == []


def test_lone_surrogates_are_refused_from_the_sdk_and_cli_too(server, function_dict):
    from runplane.errors import InvalidValueError
    from runplane.spec.function import Function
    from runplane.spec.run_options import RunOptions

    with pytest.raises(InvalidValueError, match="params.x"):
        RunOptions(params={"x": LONE})
    fn = Function.from_dict(function_dict())
    with pytest.raises(InvalidValueError, match="env GREETING"):
        fn.set_env("GREETING", LONE)
    with pytest.raises(InvalidValueError, match="spec.description"):
        fn.spec.description = LONE
    fn.metadata.tag = LONE  # a part no check of its own reads: the run's record refuses it
    with pytest.raises(InvalidValueError, match="function.metadata.tag"):
        server.runs.submit(fn, RunOptions(), owner="bob")
    assert server.runs.list_runs(limit=10) == []


def test_a_stored_lone_surrogate_is_read_escaped_never_a_500(server, client, function_dict):
    """As an older version stored it: the run's parameters, function, results and inputs
    hold lone surrogates (escaped in the JSON columns)."""
    uid = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()[
        "uid"
    ]
    wait_state(client, uid, {"completed"})
    function = function_dict()
    function["metadata"]["labels"] = {"team": LONE}
    function["spec"]["env"] = [{"name": "GREETING", "value": LONE}]
    with server.runs.store._engine.begin() as connection:
        connection.execute(
            update(Run)
            .where(Run.uid == uid)
            .values(
                params={"x": LONE, LONE: [LONE]},
                inputs={"data": LONE},
                results={"out": LONE},
                function=function,
            )
        )
    for headers in (USER, ADMIN):
        listed = client.get("/api/v1/runs", headers=headers)
        assert listed.status_code == 200, listed.text
        (run,) = listed.json()
        assert run["params"] == {"x": "x\\ud800y", "x\\ud800y": ["x\\ud800y"]}  # escaped as text
        got = client.get(f"/api/v1/runs/{uid}", headers=headers)
        assert got.status_code == 200, got.text
        assert got.json()["function"]["spec"]["env"][0]["value"] == "x\\ud800y"
        assert got.json()["results"] == {"out": "x\\ud800y"}
    pages = browser(server, USER)
    for page in ("/ui/projects/default/jobs", f"/ui/runs/{uid}"):
        shown = pages.get(page)
        assert shown.status_code == 200, (page, shown.text[:2000])
    assert "x\\ud800y" in pages.get(f"/ui/runs/{uid}").text
    # Run again, the stored label (now escaped text) is no label: said so, as a page.
    rerun = pages.get("/ui/projects/default/jobs/new", params={"rerun": uid})
    assert rerun.status_code == 422, rerun.text[:2000]
    assert "metadata.labels[&#39;team&#39;]: " in rerun.text
    assert "ud800y&#39; is not valid" in rerun.text


# -- numbers written as text --------------------------------------------------------------------

ODD_NUMBERS = ["²", "9" * 5000, ARABIC_128, FULLWIDTH_1, "1_0", "-1", "0x10"]


@pytest.mark.parametrize(
    "resumed",
    ODD_NUMBERS,
    ids=["superscript", "5000-digits", "arabic", "fullwidth", "underscore", "negative", "hex"],
)
def test_a_live_logs_resume_point_is_a_number_or_refused(server, client, function_dict, resumed):
    uid = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()[
        "uid"
    ]
    wait_state(client, uid, {"completed"})
    pages = browser(server, USER)
    # A header is Latin-1 to the server: "²" arrives as itself, other scripts' digits as bytes.
    raw = resumed.encode("latin-1") if resumed.isascii() or resumed == "²" else resumed.encode()
    answer = pages.get(f"/ui/runs/{uid}/logs/live", headers={"Last-Event-ID": raw})
    assert answer.status_code == 422, answer.text[:500]
    assert "Last-Event-ID" in answer.text
    assert answer.headers["content-type"].startswith("text/html")
    assert len(answer.text) < 20_000  # the value cut short, not repeated whole
    resumed_at_zero = pages.get(f"/ui/runs/{uid}/logs/live", headers={"Last-Event-ID": "0"})
    assert resumed_at_zero.status_code == 200
    assert "event: end" in resumed_at_zero.text


@pytest.mark.parametrize(
    "gpus",
    ["²", "9" * 5000, ARABIC_128[0], "1.5"],
    ids=["superscript", "5000-digits", "arabic", "fraction"],
)
def test_new_jobs_gpu_limit_is_a_number_or_a_field_error(server, client, function_dict, gpus):
    pages = browser(server, USER)
    csrf = csrf_of(pages, "/ui/projects/default/jobs/new")
    form = {"csrf": csrf, "base": json.dumps(function_dict()), "gpu_limit": gpus}
    answer = pages.post("/ui/projects/default/jobs/new/check", data=form)
    assert answer.status_code == 200, answer.text[:2000]
    assert "is not a whole number of GPUs; use 0 to 4096, as 1" in answer.text
    assert "GPU limit: " in answer.text


@pytest.mark.parametrize(
    "replicas", ["²", "9" * 5000, "\u0663"], ids=["superscript", "5000-digits", "arabic"]
)
def test_deploy_forms_numbers_are_numbers_or_a_field_error(server, client, replicas):
    code = "def handler(context, event):\n    return 'ok'\n"
    import base64

    serving = {
        "kind": "serving",
        "metadata": {"name": "predictor"},
        "spec": {
            "build": {"source": base64.b64encode(code.encode()).decode(), "filename": "p.py"},
            "handler": "handler",
        },
    }
    assert client.post("/api/v1/functions", headers=USER, json=serving).status_code < 300
    pages = browser(server, USER)
    page = "/ui/projects/default/functions/predictor/deploy"
    csrf = csrf_of(pages, page)
    answer = pages.post(page, data={"csrf": csrf, "min_replicas": replicas, "max_replicas": "2"})
    assert answer.status_code == 422, answer.text[:2000]
    assert "min_replicas" in answer.text
    assert "a whole number from 0 to 2147483647" in answer.text


# -- the web pages' own refusals ----------------------------------------------------------------

UI_REFUSALS = [
    ("/ui/projects/default/jobs?page=abc", "page", "abc"),
    ("/ui/projects/default/jobs?state=" + "x" * 300, "state", "x" * 20),
    ("/ui/runs/{uid}/logs?offset=-1", "offset", "-1"),
    ("/ui/projects/default/jobs/new/cron?cron=" + "1" * 129, "cron", "1" * 20),
    ("/ui/projects/default/jobs/live?since=never", "since", "never"),
]


@pytest.mark.parametrize(
    ("path", "field", "value"), UI_REFUSALS, ids=[f for _, f, _ in UI_REFUSALS]
)
def test_the_web_pages_refuse_bad_queries_with_a_page(
    server, client, function_dict, path, field, value
):
    uid = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()[
        "uid"
    ]
    pages = browser(server, USER)
    answer = pages.get(path.format(uid=uid))
    assert answer.status_code == 422, answer.text[:500]
    assert answer.headers["content-type"].startswith("text/html")
    assert "<html" in answer.text
    assert f"{field}: &#39;{value}" in answer.text  # the value, escaped and cut short
    assert "is not valid" in answer.text
    assert '"detail"' not in answer.text


def test_a_bad_query_on_a_page_is_escaped(server):
    pages = browser(server, USER)
    answer = pages.get("/ui/projects/default/jobs", params={"page": "<script>alert(1)</script>"})
    assert answer.status_code == 422
    assert "<script>alert" not in answer.text
    assert "&lt;script&gt;" in answer.text


# -- others' runs -------------------------------------------------------------------------------


def test_the_web_pages_never_tell_of_another_users_run(server, client, function_dict):
    alices = client.post("/api/v1/runs", headers=ADMIN, json={"function": function_dict()}).json()[
        "uid"
    ]
    wait_state(client, alices, {"completed"}, headers=ADMIN)
    pages = browser(server, USER)
    missing = pages.get("/ui/runs/" + "f" * 32)
    for typed in (alices[:6], alices[:12], alices):
        for path in ("", "/logs", "/live", "/logs/live"):
            answer = pages.get(f"/ui/runs/{typed}{path}")
            assert answer.status_code == missing.status_code == 404, (path, answer.text[:500])
            assert f"run &#39;{typed}&#39; does not exist" in answer.text
            if typed != alices:
                assert alices not in answer.text  # the rest of the uid stays unsaid
            assert "alice" not in answer.text
        rerun = pages.get("/ui/projects/default/jobs/new", params={"rerun": typed})
        assert rerun.status_code == 404
        assert "alice" not in rerun.text
        assert typed == alices or alices not in rerun.text
    csrf = csrf_of(pages, "/ui/projects/default/jobs")
    aborted = pages.post(f"/ui/runs/{alices[:6]}/abort", data={"csrf": csrf})
    assert aborted.status_code == 404
    assert alices not in aborted.text
    admins = browser(server, ADMIN)
    assert admins.get(f"/ui/runs/{alices[:6]}").status_code == 200  # admins see everyone's


def test_a_prefix_shared_with_another_users_run_names_ones_own(server, client, function_dict):
    """Two runs whose uids start alike, one each: a user's prefix names their own, and says
    nothing of the other's."""
    import uuid

    from runplane.spec.function import Function

    mine = "abcdef" + uuid.uuid4().hex[6:]
    theirs = "abcdef" + uuid.uuid4().hex[6:]
    fn = Function.from_dict(function_dict())
    server.runs.submit(fn, uid=theirs, owner="alice")
    server.runs.submit(fn, uid=mine, owner="bob")
    pages = browser(server, USER)
    answer = pages.get("/ui/runs/abcdef")
    assert answer.status_code == 200, answer.text[:500]
    assert mine in answer.text
    assert theirs not in answer.text
    admins = browser(server, ADMIN)
    assert admins.get("/ui/runs/abcdef").status_code == 409  # ambiguous to whoever sees both


# -- quantities -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "memory", [ARABIC_128 + "Mi", FULLWIDTH_256 + "Mi", "128Mi\n", "1e3\n", "\u0660.5Gi"]
)
def test_memory_in_other_digits_or_with_a_newline_is_refused(client, function_dict, memory):
    function = function_dict()
    function["spec"]["resources"] = {"limits": {"memory": memory}}
    answer = client.post("/api/v1/runs", headers=USER, json={"function": function})
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "spec.resources.limits.memory"
    assert "ASCII digits" in answer.json()["message"]

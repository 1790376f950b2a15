"""The service shared safely: what a run sees, who may do what, what never leaks, what files
are whose."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from runplane import names
from runplane.service.api import create_app
from runplane.service.schedules import fire_uid
from runplane.ui import mount

from .cli_service import running_service
from .conftest import ADMIN, USER, log_in, wait_state

ENV_PROBE = """
import os

def handler(context):
    return {"names": sorted(os.environ), "home": os.environ.get("HOME", ""),
            "tmp": os.environ.get("TMPDIR", ""), "mine": os.environ.get("MINE", "")}
"""


def test_a_run_sees_only_the_environment_its_spec_grants(
    client, server, function_dict, monkeypatch
):
    # The service process holds every token and the database URL in its environment.
    assert "RUNPLANE_SERVICE__TOKENS" in os.environ
    monkeypatch.setenv("CLOUD_SECRET_KEY", "from-the-server")
    probe = function_dict(ENV_PROBE, name="probe")
    probe["spec"]["env"] = [{"name": "MINE", "value": "granted"}]
    uid = client.post("/api/v1/runs", headers=USER, json={"function": probe}).json()["uid"]
    run = wait_state(client, uid, {"completed", "error"})
    assert run["state"] == "completed", run["status_text"]
    seen = run["results"]["names"]
    assert not [name for name in seen if name.startswith("RUNPLANE_SERVICE")]
    assert "CLOUD_SECRET_KEY" not in seen
    assert "PATH" in seen
    assert run["results"]["mine"] == "granted"
    home = Path(run["results"]["home"])
    assert home.parent.name == uid  # a home of its own, inside the run's directory
    assert Path(run["results"]["tmp"]).parent == home.parent


def test_a_pod_carries_nothing_of_the_service_environment(server, function_dict):
    from runplane.runtimes.request import build_request
    from runplane.spec.function import Function

    request = build_request(Function.from_dict(function_dict()), server.settings, uid="a" * 32)
    env = {item["name"] for item in request.pod_spec["containers"][0]["env"]}
    assert "RUNPLANE_SERVICE__TOKENS" in os.environ
    assert env <= names.RESERVED_ENV  # only the run's own invocation


def test_users_act_on_their_own_runs_and_schedules(client, function_dict):
    slow = function_dict("import time\ndef handler(context):\n    time.sleep(30)\n", name="slow")
    alices = client.post("/api/v1/runs", headers=ADMIN, json={"function": slow}).json()["uid"]
    bobs = client.post("/api/v1/runs", headers=USER, json={"function": slow}).json()["uid"]
    for path in ("", "/events", "/logs", "/usage", "/usage/samples"):
        refused = client.get(f"/api/v1/runs/{alices}{path}", headers=USER)
        assert refused.status_code == 403, path
        assert refused.json()["message"] == (
            f"run {alices}: belongs to another user; user 'bob' sees and acts on their own only"
        )
    assert client.post(f"/api/v1/runs/{alices}/abort", headers=USER).status_code == 403
    by_prefix = client.post(f"/api/v1/runs/{alices[:8]}/abort", headers=USER)
    assert by_prefix.status_code == 403
    assert (
        by_prefix.json()["message"]
        == (  # the rest of the uid and its owner stay unsaid
            f"run {alices[:8]}: belongs to another user; user 'bob' sees and acts on their own only"
        )
    )
    assert [r["uid"] for r in client.get("/api/v1/runs", headers=USER).json()] == [bobs]
    listed = client.get("/api/v1/runs", headers=ADMIN).json()
    assert {r["uid"]: r["owner"] for r in listed} == {alices: "alice", bobs: "bob"}
    assert [
        r["uid"] for r in client.get("/api/v1/runs", headers=ADMIN, params={"owner": "bob"}).json()
    ] == [bobs]
    assert client.post(f"/api/v1/runs/{bobs}/abort", headers=ADMIN).status_code == 200  # admins may
    assert client.post(f"/api/v1/runs/{alices}/abort", headers=ADMIN).status_code == 200
    schedule = client.post(
        "/api/v1/schedules", headers=ADMIN, json={"function": function_dict(), "schedule": "@daily"}
    ).json()
    assert client.get("/api/v1/schedules", headers=USER).json() == []
    assert client.delete(f"/api/v1/schedules/{schedule['id']}", headers=USER).status_code == 403
    assert client.delete(f"/api/v1/schedules/{schedule['id']}", headers=ADMIN).status_code == 204


def test_a_fired_schedule_runs_as_its_creator(client, server, function_dict):
    created = client.post(
        "/api/v1/schedules",
        headers=USER,
        json={"function": function_dict(), "schedule": "* * * * *"},
    ).json()
    (uid,) = server.schedules.fire_due(created["last_fired_at"] + 120, server.fire)
    assert client.get(f"/api/v1/runs/{uid}", headers=USER).json()["owner"] == "bob"
    assert uid == fire_uid(created["id"], server.schedules.get(created["id"]).last_fired_at)


def test_a_broken_schedule_does_not_stop_the_others(client, server, function_dict):
    good = client.post(
        "/api/v1/schedules",
        headers=USER,
        json={"function": function_dict(), "schedule": "* * * * *"},
    ).json()
    broken = server.schedules.create(
        project="default",
        name="broken",
        cron="* * * * *",
        function={"kind": "job", "metadata": {"name": "broken"}},  # no code: refused at fire
        params={},
        state_thresholds={},
        user="bob",
        role="user",
    )
    later = max(good["last_fired_at"], broken.last_fired_at) + 120
    started = server.schedules.fire_due(later, server.fire)
    assert len(started) == 1
    assert server.runs.get(started[0]).name == "job"
    assert server.schedules.get(broken.id).last_fired_at > broken.last_fired_at  # passed over


def test_defaults_are_checked_whole_before_they_are_saved(client, function_dict):
    before = client.get("/api/v1/defaults", headers=USER).json()
    refused = client.patch("/api/v1/defaults", headers=ADMIN, json={"priority_class": "nope"})
    assert refused.status_code == 422
    assert "valid priority classes are low, medium, high" in refused.json()["message"]
    limits = {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}
    assert client.patch("/api/v1/defaults", headers=ADMIN, json=limits).status_code == 422
    assert client.get("/api/v1/defaults", headers=USER).json() == before  # nothing was saved
    set_low = client.patch("/api/v1/defaults", headers=ADMIN, json={"priority_class": "low"})
    assert set_low.json()["priority_class"] == "low"
    removed = client.patch("/api/v1/defaults", headers=ADMIN, json={"priority_class": None})
    assert removed.json()["priority_class"] == "medium"  # back to the configured value
    run = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()
    assert run["priority_class"] == "medium"


def test_uid_prefixes_are_not_patterns(server, client, function_dict):
    uid = client.post("/api/v1/runs", headers=USER, json={"function": function_dict()}).json()[
        "uid"
    ]
    wait_state(client, uid, {"completed"})
    from runplane.errors import InvalidValueError, NotFoundError

    for pattern in ("______", "%%%%%%", uid[:5] + "%"):
        try:
            server.runs.get(pattern)
        except (InvalidValueError, NotFoundError):
            continue
        raise AssertionError(f"{pattern!r} matched a run")
    assert server.runs.get(uid[:8]).uid == uid


def test_what_the_service_and_runs_write_is_their_owners(client, server, function_dict):
    code = (
        "def handler(context):\n"
        "    context.log_artifact('model', body='weights')\n"
        "    open('scratch.txt', 'w').write('x')\n"
        "    print('hello')\n"
    )
    uid = client.post(
        "/api/v1/runs", headers=USER, json={"function": function_dict(code, name="writer")}
    ).json()["uid"]
    run = wait_state(client, uid, {"completed", "error"})
    assert run["state"] == "completed", run["status_text"]
    home = server.settings.local.home
    run_dir = home / "runs" / uid

    def mode(path: Path) -> int:
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(home / "runs") == mode(run_dir) == mode(run_dir / "work") == 0o700
    # A fresh interpreter reads its spec from a file; a forked one is handed it.
    spec = [run_dir / "spec.json"] if server.settings.local.launcher == "fresh" else []
    for private in (
        *spec,
        run_dir / "output.log.gz",  # compressed once the run ended
        run_dir / "output.log.gz.index",
        run_dir / "events.jsonl",
        Path(run["artifacts"][0]["path"]),
        run_dir / "work" / "scratch.txt",
        home / "capacity.db",
    ):
        assert mode(private) == 0o600, private
    database = server.base_settings.service.database_url or ""
    if database.startswith("sqlite:///"):
        assert mode(Path(database.removeprefix("sqlite:///"))) == 0o600


def serve_fails(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    environment |= {"RUNPLANE_CONFIG": os.devnull, "RUNPLANE_LOCAL__HOME": str(tmp_path), **env}
    return subprocess.run(
        [sys.executable, "-m", "runplane", "serve", "--port", "1"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_bad_tokens_refuse_to_start_and_are_never_echoed(tmp_path):
    cases = {
        '[{"token": "", "user": "a"}]': "at least 16 characters",
        '[{"token": "   ", "user": "a"}]': "at least 16 characters",
        '[{"token": "hunter2hunter", "user": "a"}]': "at least 16 characters",
        '[{"token": " hunter2hunter2hunter2", "user": "a"}]': "without surrounding spaces",
        '[{"token": "hunter2hunter2hunter2", "user": "a"},'
        ' {"token": "hunter2hunter2hunter2", "user": "b"}]': "every token is distinct",
        '[{"token": "hunter2hunter2hunter2", "user": ""}]': "service.tokens.0.user",
        '[{"token": "hunter2hunter2\\u0000hunter2", "user": "a"}]': "printable ASCII",
        '[{"token": "hunter2hunter2h\u00fcnter2", "user": "a"}]': "printable ASCII",
        '[{"token": "hunter2hunter2 hunter2", "user": "a"}]': "without spaces",
        '[{"token": "hunter2hunter2\\thunter2", "user": "a"}]': "without spaces",
        '[{"token": "hunter2hunter2hunter2", "user": "a", "secrets": ["../*"]}]': "glob",
        "hunter2hunter2hunter2 is not json": "lists and objects in RUNPLANE_* variables are JSON",
    }
    for tokens, expected in cases.items():
        done = serve_fails(tmp_path, RUNPLANE_SERVICE__TOKENS=tokens)
        assert done.returncode == 2, (tokens, done.stderr)
        assert expected in done.stderr, done.stderr
        assert "hunter2" not in done.stderr + done.stdout
        assert "nter2" not in done.stderr + done.stdout
        assert "Traceback" not in done.stderr


def test_database_passwords_are_never_echoed(tmp_path):
    tokens = json.dumps([{"token": "a-token-long-enough-1", "user": "a"}])
    for url in (
        "postgresql+psycopg://runplane:hunter2@127.0.0.1:1/db",
        "hunter2 nonsense",
        "mysql+nodriver://u:hunter2@h/db",
        # Parts SQLAlchemy cannot parse raise ValueError, quoting them: a port that is not a
        # number, or a password taken for one when the '@' is missing.
        "postgresql+psycopg://runplane:hunter2@db:notaport/runplane",
        "postgresql+psycopg://runplane:hunter2/runplane",
        "postgresql+psycopg://runplane:hunter2@[::1/runplane",
    ):
        done = serve_fails(
            tmp_path, RUNPLANE_SERVICE__TOKENS=tokens, RUNPLANE_SERVICE__DATABASE_URL=url
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: service.database_url: "), done.stderr
        assert "hunter2" not in done.stderr


def test_an_in_memory_database_is_refused_at_start(tmp_path):
    tokens = json.dumps([{"token": "a-token-long-enough-1", "user": "a"}])
    for url in ("sqlite:///:memory:", "sqlite://", "sqlite:///file:db?mode=memory&uri=true"):
        done = serve_fails(
            tmp_path, RUNPLANE_SERVICE__TOKENS=tokens, RUNPLANE_SERVICE__DATABASE_URL=url
        )
        assert done.returncode == 2, done.stderr
        assert "is an in-memory database, which each of the service's connections would see " in (
            done.stderr
        )
        assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*memory*"))  # and no file of that name was made


def test_a_token_is_needed_and_compared_whole(client):
    assert client.get("/api/v1/runs").status_code == 401
    assert client.get("/api/v1/runs", headers={"Authorization": "Bearer "}).status_code == 401
    prefix = {"Authorization": USER["Authorization"][:-1]}
    assert client.get("/api/v1/runs", headers=prefix).status_code == 401
    longer = {"Authorization": USER["Authorization"] + "x"}
    assert client.get("/api/v1/runs", headers=longer).status_code == 401


def test_results_beyond_bounds_are_left_out_saying_why(client, function_dict):
    """A run's own code reports its results; one nested past the bounds or not a finite number
    would break every answer showing the run (everyone's listing, for an admin)."""
    code = (
        "def handler(context):\n"
        "    deep = 1\n"
        "    for _ in range(300):\n"
        "        deep = [deep]\n"
        "    return {'deep': deep, 'loss': float('nan'), 'accuracy': 0.9}\n"
    )
    uid = client.post(
        "/api/v1/runs", headers=USER, json={"function": function_dict(code, name="odd")}
    ).json()["uid"]
    run = wait_state(client, uid, {"completed", "error"})
    assert run["state"] == "completed"
    assert run["results"] == {"accuracy": 0.9}
    assert "result 'deep' not recorded: values nest at most 32 levels deep" in run["status_text"]
    assert "result 'loss' not recorded: values are JSON" in run["status_text"]
    assert client.get("/api/v1/runs", headers=ADMIN).status_code == 200


def pages(server, **service):
    """The API with the web UI mounted, over ``server`` with these service settings."""

    configured = server.base_settings.service.model_copy(update=service)
    server.base_settings = server.base_settings.model_copy(update={"service": configured})
    app = create_app(server)
    mount(app, server)
    now = [1000.0]
    throttle = getattr(app.state, "throttle", None)
    if throttle is not None:  # time stands still unless the test moves it
        throttle.clock = lambda: now[0]
    return app, now


def test_wrong_tokens_are_throttled_per_address_and_valid_users_elsewhere_go_on(server):
    """Guessing tokens: a burst of failures, then 429 with Retry-After before any token is
    compared; other addresses, and successful requests, are not slowed."""
    app, now = pages(server, auth_failures_per_second=1.0, auth_failure_burst=5)
    guesser = TestClient(app, client=("203.0.113.7", 40000))
    user = TestClient(app, client=("198.51.100.2", 40000))
    for _ in range(50):  # a valid user's requests take nothing from their allowance
        assert user.get("/api/v1/runs", headers=USER).status_code == 200
    wrong = {"Authorization": "Bearer not-a-token-of-this-service"}
    answers = [guesser.get("/api/v1/runs", headers=wrong) for _ in range(6)]
    assert [a.status_code for a in answers] == [401] * 5 + [429]
    assert answers[-1].headers["retry-after"] == "1"
    assert answers[-1].json()["error"] == "TooManyRequests"
    # The login form draws on the same allowance of the same address.
    assert log_in(guesser, "another-wrong-token").status_code == 429
    assert log_in(guesser, "user-token-for-the-tests").status_code == 429
    assert guesser.get("/api/v1/runs", headers=USER).status_code == 429
    # Elsewhere, everything goes on; after Retry-After the guesser may try once more.
    assert user.get("/api/v1/runs", headers=USER).status_code == 200
    assert log_in(user, "user-token-for-the-tests").status_code == 303
    now[0] += 1.0
    assert guesser.get("/api/v1/runs", headers=USER).status_code == 200
    assert log_in(guesser, "wrong-again").status_code == 401
    assert log_in(guesser, "wrong-again").status_code == 429


def test_ipv6_clients_are_throttled_per_64_block(server):
    app, _ = pages(server, auth_failure_burst=2)
    wrong = {"Authorization": "Bearer not-a-token-of-this-service"}
    for host in ("2001:db8::1", "2001:db8::2", "2001:db8::3"):
        last = TestClient(app, client=(host, 1)).get("/api/v1/runs", headers=wrong)
    assert last.status_code == 429
    other = TestClient(app, client=("2001:db8:0:1::1", 1))
    assert other.get("/api/v1/runs", headers=wrong).status_code == 401


def test_one_users_logins_end_only_their_own_oldest_sessions(server):
    """Many logins by one user once pushed everyone else's sessions out of a shared table;
    now each user keeps service.sessions_per_user, their least recently used going first."""
    app, _ = pages(server, sessions_per_user=3)
    admin = TestClient(app)
    assert log_in(admin, "admin-token-for-the-tests").status_code == 303
    sessions = []
    for _ in range(12):
        bob = TestClient(app)
        assert log_in(bob, "user-token-for-the-tests").status_code == 303
        sessions.append(bob)
    assert admin.get("/ui/", follow_redirects=False).status_code == 200
    alive = [s.get("/ui/", follow_redirects=False).status_code for s in sessions]
    assert alive == [303] * 9 + [200] * 3
    (ui,) = [route.app for route in app.routes if getattr(route, "path", "") == "/ui"]
    assert len(ui.state.ui.sessions) == 4  # at most the cap for each user


def test_login_forms_and_anonymous_bodies_are_refused_unread(server):
    """Bodies on pages: the login form is a few KiB at most, counted as it streams; a page
    that needs a session answers an anonymous request without reading its body."""
    app, _ = pages(server)
    client = TestClient(app)
    big = client.post("/ui/login", content=b"token=" + b"x" * 8192)
    assert big.status_code == 413
    assert "at most 4096 bytes" in big.json()["message"]
    streamed = client.post("/ui/login", content=(b"x" * 1024 for _ in range(8)))
    assert streamed.status_code == 413
    anonymous = client.post(
        "/ui/settings", content=b"cpu_request=1&" * 1000, follow_redirects=False
    )
    assert anonymous.status_code == 401  # the page's own answer: log in again
    assert anonymous.headers["connection"] == "close"
    assert client.post("/api/v1/health", content=b"x").status_code == 413
    assert client.post("/", content=b"x").status_code == 413


def test_pages_carry_a_strict_policy_and_the_api_docs_are_off(server):
    app, _ = pages(server)
    client = TestClient(app)
    for path in ("/ui/login", "/ui/static/runplane.css"):
        policy = client.get(path).headers["content-security-policy"]
        assert "script-src 'self';" in policy
        assert "unsafe" not in policy
    assert client.get("/docs").status_code == 404
    assert client.get("/redoc").status_code == 404
    assert client.get("/openapi.json").status_code == 200


def test_api_docs_when_enabled_load_pinned_scripts_under_a_policy(server):
    configured = server.base_settings.service.model_copy(update={"api_docs": True})
    server.base_settings = server.base_settings.model_copy(update={"service": configured})
    client = TestClient(create_app(server))
    for path, script in (("/docs", "swagger-ui-dist@5."), ("/redoc", "redoc@2.")):
        page = client.get(path)
        assert page.status_code == 200
        policy = page.headers["content-security-policy"]
        assert script in page.text
        assert "@5/" not in page.text
        assert "default-src 'none'" in policy
        assert "frame-ancestors 'none'" in policy
        assert "script-src https://cdn.jsdelivr.net/npm/" + script in policy


PROXY = "10.244.0.7"  # an Ingress controller's pod


def through_proxy(app, *forwarded, peer=PROXY):
    """A client whose connections come from ``peer``, carrying ``X-Forwarded-For`` as a proxy
    that appends the address it was reached from would send it."""
    headers = {"X-Forwarded-For": ", ".join(forwarded)} if forwarded else {}
    return TestClient(app, client=(peer, 40000), headers=headers)


def test_behind_a_trusted_proxy_the_throttle_counts_each_forwarded_caller(server):
    """Behind an Ingress every connection comes from the controller: a guesser there once
    throttled every user. From a trusted proxy the caller is the forwarded address."""
    app, _ = pages(server, auth_failure_burst=3, trusted_proxies=["10.244.0.0/16"])
    wrong = {"Authorization": "Bearer not-a-token-of-this-service"}
    guesser = through_proxy(app, "203.0.113.7")
    answers = [guesser.get("/api/v1/runs", headers=wrong).status_code for _ in range(4)]
    assert answers == [401, 401, 401, 429]
    assert log_in(guesser, "user-token-for-the-tests").status_code == 429
    # Another user through the same proxy goes on, on the API and the login page both.
    user = through_proxy(app, "198.51.100.2")
    assert user.get("/api/v1/runs", headers=USER).status_code == 200
    assert log_in(user, "user-token-for-the-tests").status_code == 303
    # Proxies in a chain: the right-most address that is not a trusted proxy is the caller.
    chained = through_proxy(app, "203.0.113.7", "10.244.3.9")
    assert chained.get("/api/v1/runs", headers=wrong).status_code == 429
    # A guesser writing its own X-Forwarded-For cannot pose as someone else: the proxy
    # appends the address it was reached from, and that one is counted.
    spoofing = through_proxy(app, "198.51.100.99", "203.0.113.7")
    assert spoofing.get("/api/v1/runs", headers=wrong).status_code == 429
    assert through_proxy(app, "198.51.100.99").get("/api/v1/runs", headers=USER).status_code == 200


def test_an_untrusted_peers_forwarded_header_is_ignored(server):
    """Without trusted proxies (the default), or from a peer not among them, the header is
    the caller's own words: a guesser cannot escape the throttle by naming new addresses."""
    wrong = {"Authorization": "Bearer not-a-token-of-this-service"}
    for trusted in ([], ["10.244.0.0/16"]):
        app, _ = pages(server, auth_failure_burst=3, trusted_proxies=trusted)
        answers = [
            through_proxy(app, f"198.51.100.{n}", peer="203.0.113.7")
            .get("/api/v1/runs", headers=wrong)
            .status_code
            for n in range(4)
        ]
        assert answers == [401, 401, 401, 429], trusted
        login = through_proxy(app, "198.51.100.50", peer="203.0.113.7")
        assert log_in(login, "user-token-for-the-tests").status_code == 429
        # The address counted is the peer's, not one it named: others are not slowed.
        named = through_proxy(app, "203.0.113.7", peer="192.0.2.1")
        assert named.get("/api/v1/runs", headers=wrong).status_code == 401


def test_bad_trusted_proxies_refuse_to_start(tmp_path):
    tokens = json.dumps([{"token": "a-token-long-enough-1", "user": "a"}])
    cases = {
        '["*"]': "'*' would believe every caller's X-Forwarded-For",
        '["ingress.example"]': "'ingress.example' is not an IP address or a CIDR network",
        '["10.244.0.1/16"]': "did you mean 10.244.0.0/16?",
        '["10.244.0.0/33"]': "'10.244.0.0/33' is not an IP address or a CIDR network",
        '"10.244.0.0/16"': "valid list",
    }
    for proxies, expected in cases.items():
        done = serve_fails(
            tmp_path, RUNPLANE_SERVICE__TOKENS=tokens, RUNPLANE_SERVICE__TRUSTED_PROXIES=proxies
        )
        assert done.returncode == 2, (proxies, done.stderr)
        assert done.stderr.startswith("error: configuration service.trusted_proxies: "), done.stderr
        assert expected in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_the_served_service_believes_no_forwarded_header_by_itself(tmp_path):
    """uvicorn by itself believes X-Forwarded-For from 127.0.0.1: anyone on the service's
    machine could name a new address for each guess. ``runplane serve`` leaves forwarded
    headers to service.trusted_proxies alone (empty here)."""
    import httpx

    wrong = {"Authorization": "Bearer not-a-token-of-this-service"}
    with running_service(tmp_path) as url, httpx.Client(base_url=url) as client:
        answers = [
            client.get(
                "/api/v1/runs", headers=wrong | {"X-Forwarded-For": f"198.51.100.{n}"}
            ).status_code
            for n in range(100)
        ]
    # A burst of service.auth_failure_burst (20) from 127.0.0.1, refilled at 1 a second: a
    # hundred guesses under a minute and a half end in 429, whatever addresses they named.
    assert answers[:20] == [401] * 20
    assert 429 in answers

"""A hostile client against a real ``runplane serve``: every input answers 4xx (never 5xx,
never a hang), and afterwards the service still answers and stays small."""

from __future__ import annotations

import base64
import json
import os
import socket
from typing import Any

import httpx
import psutil
import pytest

from testbed import serve

TOKEN = "hostile-suite-token-0123456789"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
CODE = "def handler(context, x: int = 1):\n    return {'x': x}\n"


def function(**spec: Any) -> dict[str, Any]:
    source = base64.b64encode(CODE.encode()).decode()
    return {
        "kind": "job",
        "metadata": {"name": "victim"},
        "spec": {"handler": "handler", "build": {"source": source, "filename": "job.py"}, **spec},
    }


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("hostile")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env |= {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(home / "home"),
        "RUNPLANE_LOCAL__RUN_USERS": "same",  # users of their own: test_run_users.py
        "RUNPLANE_LOCAL__CPU": "2",
        "RUNPLANE_SERVICE__TOKENS": json.dumps([{"token": TOKEN, "user": "mallory"}]),
        "RUNPLANE_SERVICE__MAX_REQUEST_BYTES": str(1 << 20),
    }
    process, url = serve.start_service(env, home / "service.log")
    with httpx.Client(base_url=f"{url}/api/v1", timeout=30) as client:
        yield process, client
    process.terminate()
    process.wait(timeout=30)


QUANTITIES = [
    "1e10000003",
    "1e400",
    "1E999999999",
    "99999999999999999999Ei",
    "nan",
    "inf",
    "-1",
    "1.5.5",
    "0x10",
    " 1",
    "1" * 70,
]
PATH_TRICKS = [
    (
        "build.filename",
        {
            "build": {
                "source": base64.b64encode(CODE.encode()).decode(),
                "filename": "../../../etc/cron.d/x.py",
            }
        },
    ),
    (
        "mountPath",
        {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}],
            "volume_mounts": [{"name": "d", "mountPath": "/data/../../etc"}],
        },
    ),
    (
        "subPath",
        {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}],
            "volume_mounts": [{"name": "d", "mountPath": "/data", "subPath": "../../etc"}],
        },
    ),
    (
        "subPath",
        {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}],
            "volume_mounts": [{"name": "d", "mountPath": "/data", "subPath": "/etc"}],
        },
    ),
    (
        "secretName",
        {
            "volumes": [{"name": "s", "secret": {"secretName": "../../etc"}}],
            "volume_mounts": [{"name": "s", "mountPath": "/s"}],
        },
    ),
    (
        "claimName",
        {
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "a/b"}}],
            "volume_mounts": [{"name": "d", "mountPath": "/d"}],
        },
    ),
    (
        "hostPath",
        {
            "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
            "volume_mounts": [{"name": "h", "mountPath": "/host"}],
        },
    ),
    (
        "items",
        {
            "volumes": [
                {
                    "name": "c",
                    "configMap": {"name": "cfg", "items": [{"key": "a", "path": "../../x"}]},
                }
            ],
            "volume_mounts": [{"name": "c", "mountPath": "/c"}],
        },
    ),
    (
        "secretKeyRef",
        {
            "env": [
                {
                    "name": "T",
                    "valueFrom": {"secretKeyRef": {"name": "creds", "key": "../../../etc/shadow"}},
                }
            ]
        },
    ),
    (
        "secretKeyRef",
        {
            "env": [
                {"name": "T", "valueFrom": {"secretKeyRef": {"name": "../creds", "key": "token"}}}
            ]
        },
    ),
]
MALFORMED = [
    ("spec.build.source", {"build": {"source": "not base64!!", "filename": "a.py"}}),
    (
        "spec.build.source",
        {"build": {"source": base64.b64encode(b"\xff\xfe").decode(), "filename": "a.py"}},
    ),
    (
        "filename",
        {"build": {"source": base64.b64encode(b"def handler(:\n").decode(), "filename": "a.py"}},
    ),
    (
        "filename",
        {
            "build": {
                "source": base64.b64encode(b"x = " + b"(" * 500 + b")" * 500).decode(),
                "filename": "a.py",
            }
        },
    ),
    ("spec.affinity", {"affinity": {"nodeAffinity": "everywhere"}}),
    ("spec.affinity", {"affinity": [1, 2]}),
    ("env", {"env": [{"name": "A", "value": "nul\x00byte"}]}),
    ("env", {"env": [{"name": "A", "value": "x" * (1 << 19)}]}),
    ("env", {"env": [{"name": "RUNPLANE_PARAMS", "value": "{}"}]}),
    ("spec.args", {"args": ["a"] * 10_000}),
    ("spec.command", {"build": {}, "command": "/etc/passwd"}),
]


def submit(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return client.post("/runs", headers=HEADERS, json=body)


def assert_refused(answer: httpx.Response, field: str = "") -> None:
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:500])
    body = answer.json()
    assert set(body) == {"error", "message", "field"}, body  # one shape for every 4xx
    assert field in body["message"], body
    assert len(answer.content) < 4096, "an error repeats no megabytes"


@pytest.mark.parametrize("quantity", QUANTITIES)
def test_quantities_beyond_reason(service, quantity):
    _, client = service
    answer = submit(client, {"function": function(resources={"limits": {"memory": quantity}})})
    assert_refused(answer, "spec.resources.limits.memory")


@pytest.mark.parametrize(("field", "spec"), PATH_TRICKS, ids=[f for f, _ in PATH_TRICKS])
def test_paths_never_leave_their_place(service, field, spec):
    _, client = service
    assert_refused(submit(client, {"function": function(**spec)}), field)


@pytest.mark.parametrize(("field", "spec"), MALFORMED, ids=[f for f, _ in MALFORMED])
def test_malformed_functions(service, field, spec):
    _, client = service
    assert_refused(submit(client, {"function": function(**spec)}), field)


@pytest.mark.parametrize("levels", [33, 300, 5000, 100_000])
def test_deep_values(service, levels):
    _, client = service
    body = {"function": function(), "params": {"x": nested(levels)}}
    text = (
        json.dumps(body)
        if levels < 900
        else (
            '{"function": '
            + json.dumps(function())
            + ', "params": {"x": '
            + "[" * levels
            + "1"
            + "]" * levels
            + "}}"
        )
    )
    answer = client.post(
        "/runs", headers={**HEADERS, "Content-Type": "application/json"}, content=text
    )
    assert_refused(answer)
    assert answer.status_code == 422
    assert answer.json()["field"].startswith("params")  # where it is too deep


NUMBERS = [
    ("1" + "0" * 5000, "integers have at most 4300 digits"),
    ("-" + "9" * 4301, "integers have at most 4300 digits"),
    ("1e400", "numbers are finite"),
    ("-1e999", "numbers are finite"),
    ("NaN", "NaN and Infinity are not JSON numbers"),
    ("Infinity", "NaN and Infinity are not JSON numbers"),
]


@pytest.mark.parametrize(("number", "reason"), NUMBERS, ids=[r[:12] for _, r in NUMBERS])
@pytest.mark.parametrize("path", ["/runs", "/functions", "/schedules"])
def test_numbers_json_cannot_carry(service, number, reason, path):
    _, client = service
    text = '{"params": {"x": [1, ' + number + ']}, "function": ' + json.dumps(function()) + "}"
    answer = client.post(
        path, headers={**HEADERS, "Content-Type": "application/json"}, content=text
    )
    assert answer.status_code == 422, answer.text
    assert_refused(answer, reason)
    assert answer.json()["field"] == "params.x[1]"
    assert len(answer.json()["message"]) < 400  # the number is described, not repeated


def test_deep_bodies_are_refused_before_any_route(service):
    _, client = service
    deep = "[" * 100_000 + "]" * 100_000
    for path in ("/functions", "/runs", "/schedules", "/deployments"):
        answer = client.post(
            path,
            headers={**HEADERS, "Content-Type": "application/json"},
            content='{"function": {"spec": {"args": ' + deep + "}}}",
        )
        assert answer.status_code == 422, (path, answer.text)
        assert answer.json()["field"] == "function.spec.args[0][0][0]..."


def test_a_request_without_a_token_is_refused_before_its_body_is_read(service):
    """Headers alone, announcing a body the limit allows, and never sending it: the 401
    comes back at once, so nothing of an anonymous body is read, held or parsed."""
    _, client = service
    address = (client.base_url.host, client.base_url.port)
    for authorization in (b"", b"Authorization: Bearer not-a-token-of-this-service\r\n"):
        with socket.create_connection(address, timeout=10) as connection:
            connection.sendall(
                b"POST /api/v1/runs HTTP/1.1\r\nHost: runplane\r\n"
                b"Content-Type: application/json\r\nContent-Length: 900000\r\n"
                + authorization
                + b"\r\n"
            )
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
                chunk = connection.recv(65536)  # times out (fails) if the service waits
                if not chunk:
                    break
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 401"), answer
        assert b"connection: close" in head.lower()
        assert json.loads(body) == {
            "error": "HTTPError",
            "message": "a valid bearer token is required",
            "field": None,
        }


TYPED = (
    "def handler(context, layers: list = None, options: dict = None, rate: float = 0.1):\n"
    "    pass\n"
)
CONVERTED = [
    ({"layers": "[" * 300 + "]" * 300}, "params['layers']", "JSON nests at most 40 levels"),
    ({"layers": "[" * 35 + "]" * 35}, "params", "values nest at most 32 levels deep"),
    ({"options": '{"a": NaN}'}, "params['options']", "NaN and Infinity are not JSON numbers"),
    ({"layers": "[1e999]"}, "params['layers']", "numbers are finite"),
    ({"layers": "[" + "9" * 5000 + "]"}, "params['layers']", "at most 4300 digits"),
    ({"rate": "1e999"}, "params['rate']", "the handler expects float"),
    ({"rate": "nan"}, "params['rate']", "the handler expects float"),
]


@pytest.mark.parametrize(("params", "field", "reason"), CONVERTED)
def test_parameters_converted_from_text_are_bounded_too(service, params, field, reason):
    """The CLI sends ``--param layers=[...]`` as text; what the text converts to is held to
    the same bounds as JSON the API reads, or listing runs would break on it later."""
    _, client = service
    typed = function()
    typed["spec"]["build"]["source"] = base64.b64encode(TYPED.encode()).decode()
    answer = submit(client, {"function": typed, "params": params})
    assert answer.status_code == 422, answer.text
    assert_refused(answer, reason)
    assert answer.json()["field"] == field
    assert client.get("/runs", headers=HEADERS).status_code == 200


@pytest.mark.parametrize("memory", ["0", "1", "4Mi", "15Mi"])
def test_memory_limits_too_small_to_start_python(service, memory):
    _, client = service
    answer = submit(client, {"function": function(resources={"limits": {"memory": memory}})})
    assert answer.status_code == 422
    assert_refused(answer, "a memory limit is at least 16Mi")
    assert answer.json()["field"] == "spec.resources.limits.memory"


def test_bodies_over_the_limit_are_refused_unread_and_before_auth(service):
    _, client = service
    huge = b'{"function": "' + b"x" * (2 << 20) + b'"}'
    answer = client.post("/runs", content=huge, headers={"Content-Type": "application/json"})
    assert answer.status_code == 413
    assert answer.json()["error"] == "RequestTooLarge"

    def chunks():  # no Content-Length: counted as it streams
        for _ in range(64):
            yield b"x" * 65536

    for headers, status in (({}, 401), (HEADERS, 413)):  # without a token: not even read
        try:
            streamed = client.post("/runs", content=chunks(), headers=headers)
        except httpx.TransportError:
            pass  # refused mid-upload: the service answered and closed while the client wrote
        else:
            assert streamed.status_code == status
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize(
    "cron",
    ["0 0 31 2 *", "* * * * * *", "*/0 * * * *", "61 * * * *", "every day", "@sometimes", ""],
)
def test_schedules_that_never_fire_or_fire_every_second(service, cron):
    _, client = service
    answer = client.post(
        "/schedules", headers=HEADERS, json={"function": function(), "schedule": cron}
    )
    assert_refused(answer, "schedule")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/nope", 404),
        ("DELETE", "/runs", 405),
        ("GET", "/runs?limit=0", 422),
        ("GET", "/runs?state=finished", 422),
        ("GET", "/runs/zzzzzzzz", 422),
        ("POST", "/runs", 422),
    ],
)
def test_every_4xx_has_one_shape(service, method, path, status):
    _, client = service
    answer = client.request(method, path, headers=HEADERS, content=b"{not json")
    assert answer.status_code == status, answer.text
    assert set(answer.json()) == {"error", "message", "field"}


def test_the_service_still_answers_and_stays_small(service):
    process, client = service
    assert client.get("/health").json()["status"] == "ok"
    runs = client.get("/runs", headers=HEADERS)
    assert runs.status_code == 200
    assert runs.json() == []  # nothing hostile was recorded
    rss = psutil.Process(process.pid).memory_info().rss
    assert rss < 300 * 2**20, f"the service grew to {rss / 2**20:.0f} MiB"


@pytest.fixture(scope="module")
def roomy(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A service with the default request limit (8 MiB)."""
    home = tmp_path_factory.mktemp("roomy")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env |= {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(home / "home"),
        "RUNPLANE_LOCAL__RUN_USERS": "same",
        "RUNPLANE_SERVICE__TOKENS": json.dumps([{"token": TOKEN, "user": "mallory"}]),
    }
    process, url = serve.start_service(env, home / "service.log")
    yield process, httpx.URL(url)
    process.terminate()
    process.wait(timeout=30)


FLOODED = [
    ("/ui/login", "length"),
    ("/ui/login", "chunked"),
    ("/ui/settings", "length"),
    ("/ui/projects/default/jobs/new", "chunked"),
    ("/api/v1/health", "length"),
    ("/", "chunked"),
]


def flood(address: tuple[str, int], path: str, framing: str) -> socket.socket:
    """A connection sending an anonymous body of nearly 8 MiB and never its last byte."""
    size = (8 << 20) - 1024
    connection = socket.create_connection(address, timeout=30)
    head = f"POST {path} HTTP/1.1\r\nHost: runplane\r\n"
    head += "Content-Type: application/x-www-form-urlencoded\r\n"
    chunked = "Transfer-Encoding: chunked\r\n"
    head += f"Content-Length: {size}\r\n" if framing == "length" else chunked
    piece = b"x" * 65536
    if framing == "chunked":
        piece = b"%x\r\n" % len(piece) + piece + b"\r\n"
    try:
        connection.sendall(head.encode() + b"\r\n")
        for _ in range(size // 65536):
            connection.sendall(piece)
    except OSError:  # answered and closed: the rest is never read
        pass
    return connection


def test_anonymous_bodies_are_never_held_on_any_path(roomy):
    """40 anonymous connections each sending ~8 MiB (to the login form, to pages, to paths
    that read no body) and never finishing: the service holds none of it."""
    process, url = roomy
    address = (url.host, url.port)
    service = psutil.Process(process.pid)
    assert httpx.get(url.join("/api/v1/health")).status_code == 200
    before = service.memory_info().rss
    connections = [flood(address, *FLOODED[n % len(FLOODED)]) for n in range(40)]
    grown = service.memory_info().rss - before
    for connection in connections:
        connection.close()
    assert grown < 50 * 2**20, f"the service grew by {grown / 2**20:.0f} MiB"
    assert httpx.get(url.join("/api/v1/health")).status_code == 200


@pytest.mark.parametrize(("path", "framing"), FLOODED)
def test_anonymous_bodies_are_answered_before_they_are_read(roomy, path, framing):
    """Each flooded path answers from the headers (or the first few KiB of a login form)
    and closes the connection: 413 where no body that large is read, the login page where
    a page needs a session."""
    _, url = roomy
    with socket.create_connection((url.host, url.port), timeout=30) as connection:
        head = f"POST {path} HTTP/1.1\r\nHost: runplane\r\n"
        if framing == "length":
            head += f"Content-Length: {8 << 20}\r\n\r\n"
            connection.sendall(head.encode())
        else:
            connection.sendall(f"{head}Transfer-Encoding: chunked\r\n\r\n".encode())
            connection.sendall(b"2000\r\n" + b"x" * 0x2000 + b"\r\n")
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = connection.recv(65536)  # times out (fails) if the service waits for more
            if not chunk:
                break
            answer += chunk
    head_line = answer.split(b"\r\n", 1)[0]
    expected = b" 401 " if path.startswith("/ui/") and path != "/ui/login" else b" 413 "
    assert expected in head_line, answer[:300]
    assert b"connection: close" in answer.lower()

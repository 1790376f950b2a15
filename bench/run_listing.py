"""Listing a million recorded runs: the API, the CLI's query and the web UI, each filter.

Loads ``--runs`` runs straight into a database (PostgreSQL's COPY; SQLite with ``--sqlite``),
spread as a team's years of runs are: 50 projects and 200 owners of skewed sizes, 500
function names, mostly finished states, labels (``team``: 10 values, ``tier``: 3, and a rare
``experiment``), creation times over a year; each run with a function snapshot, an attempt
and two transitions. The indexes are built after the load, and PostgreSQL's statistics
gathered (what autovacuum does on its own). Then it starts ``runplane serve`` on it as its own
process and times, over HTTP on loopback, ``--requests`` requests of each list query (the
first page, a page deep in the list from a cursor, each filter, a user's own runs, the counts)
and of the web UI's runs page; then Debian's Chromium loads the UI's pages (Playwright), and
pages through and filters the runs list in place, as a user's clicks do.

    python bench/run_listing.py [--runs 1000000] [--requests 50] [--database-url URL]
    python bench/run_listing.py --sqlite [--runs 100000]
    python bench/run_listing.py --database-url URL --load-only   # then, as often as needed:
    python bench/run_listing.py --database-url URL --loaded      # the same day (same runs)
    python bench/run_listing.py ... --baseline-script OLD/runplane.js  # a script change, A/B

Without ``--database-url`` a throwaway PostgreSQL server is started (scripts/postgres.sh, its
own data directory and port). ``--check`` compares every answer with the runs as generated
(what the test suite's smoke run does, with a few thousand runs).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import httpx
import psutil

from runplane.service.db import connect
from runplane.service.db.models import ATTEMPTS, COUNTS, LABELS, RUNS, TRANSITIONS
from testbed import serve

ROOT = Path(__file__).resolve().parents[1]
ADMIN_TOKEN = "bench-listing-admin-0123456789"
USER_TOKEN = "bench-listing-user-0123456789"
#: The web UI's script as this checkout serves it.
_SCRIPT = ROOT / "src" / "runplane" / "ui" / "static" / "runplane.js"
#: The user whose token the bench holds: the busiest owner.
USER = "user-000"
YEAR = 365 * 86400
CODE = base64.b64encode(
    (
        "def train(context, epochs: int = 1):\n"
        + "".join(f"    # step {n}: a comment standing for a handler's body\n" for n in range(12))
        + "    return {'accuracy': 0.9}\n"
    ).encode()
).decode()
#: States of recorded runs, by weight: mostly finished, a few live.
STATES = {"completed": 85.0, "error": 8.0, "aborted": 3.5, "running": 2.0, "pending": 1.0}
STATES["created"] = 0.5


@dataclass(frozen=True, slots=True)
class Spread:
    """The runs as generated: each run's (created_at, uid) key and what it is filtered by."""

    created: list[float]
    uids: list[str]
    project: list[str]
    owner: list[str]
    name: list[str]
    state: list[str]
    labels: list[dict[str, str]]

    def newest(
        self, match: Callable[[int], bool], after: tuple[float, str] | None = None
    ) -> list[str]:
        """Uids of the matching runs, newest first, after a key: what a list must answer
        (the runs are generated oldest first)."""
        found = []
        for i in range(len(self.uids) - 1, -1, -1):
            if after is not None and (self.created[i], self.uids[i]) >= after:
                continue
            if match(i):
                found.append(self.uids[i])
                if len(found) == 50:
                    break
        return found


def _zipf(count: int) -> list[float]:
    """Cumulative weights of 0..count-1 as Zipf's law spreads them (the first far more often:
    a few projects and people hold most runs)."""
    weights = [1 / (rank + 1) for rank in range(count)]
    return [sum(weights[: n + 1]) for n in range(count)]


def generate(runs: int, seed: int = 7) -> Spread:
    rng = random.Random(seed)
    now = time.time() // 86400 * 86400  # today, so that --loaded finds the same runs today
    start = now - YEAR
    created = sorted(start + rng.random() * YEAR for _ in range(runs))
    states, weights = list(STATES), list(STATES.values())
    spread = Spread(created, [], [], [], [], [], [])
    projects, owners = _zipf(50), _zipf(200)
    for _ in range(runs):
        project = rng.choices(range(50), cum_weights=projects)[0]
        spread.uids.append(f"{rng.getrandbits(128):032x}")
        spread.project.append(f"proj-{project:02d}")
        spread.owner.append(f"user-{rng.choices(range(200), cum_weights=owners)[0]:03d}")
        spread.name.append(f"fn-{project * 10 + rng.randrange(10):03d}")
        spread.state.append(rng.choices(states, weights)[0])
        labels = {"team": f"team-{rng.randrange(10)}", "tier": rng.choice(["dev", "stage", "prod"])}
        if rng.random() < 0.001:
            labels["experiment"] = f"exp-{rng.randrange(100)}"
        spread.labels.append(labels)
    return spread


def _rows(spread: Spread) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]]:
    """Each run's row, its transitions and its attempt, as the service records them."""
    for i, uid in enumerate(spread.uids):
        at, state = spread.created[i], spread.state[i]
        finished = state in ("completed", "error", "aborted")
        started = at + 2 if state in ("running", *(("completed", "error", "aborted"))) else None
        ended = at + 60 if finished else None
        function = {
            "kind": "job",
            "metadata": {
                "name": spread.name[i],
                "project": spread.project[i],
                "labels": spread.labels[i],
            },
            "spec": {"handler": "train", "image": "python:3.11", "build": {"source": CODE}},
        }
        run = {
            "uid": uid,
            "project": spread.project[i],
            "name": spread.name[i],
            "runtime": "kubernetes",
            "state": state,
            "reason": "Error" if state == "error" else "",
            "status_text": "",
            "function": function,
            "params": {"epochs": 3},
            "inputs": {},
            "thresholds": {},
            "priority_class": "",
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"memory": "2Gi"},
            "results": {"accuracy": 0.9} if state == "completed" else {},
            "peak_memory_bytes": 512 << 20 if finished else 0,
            "cpu_seconds": 12.5 if finished else 0.0,
            "created_at": at,
            "updated_at": ended or started or at,
            "state_since": ended or started or at,
            "started_at": started,
            "ended_at": ended,
            "executor_pid": None,
            "executor_started": None,
            "abort_requested": False,
            "owner": spread.owner[i],
            "source_dir": "",
            "requeue": False,
            "isolation": "",
            "attempt": 1,
            "retry_at": None,
            "logs_removed_at": None,
            "resized": 0,
        }
        transitions = [{"run_uid": uid, "state": "created", "reason": "", "message": "", "at": at}]
        if state != "created":
            transitions.append(
                {"run_uid": uid, "state": state, "reason": "", "message": "", "at": ended or at + 1}
            )
        attempt = {
            "run_uid": uid,
            "number": 1,
            "node": "node-1" if started else "",
            "started_at": started,
            "ended_at": ended,
            "exit_code": (0 if state == "completed" else 1) if finished else None,
            "reason": "",
            "failure": "error" if state == "error" else "",
            "message": "",
            "node_group": "",
            "due_at": at,
            "launched_at": at,
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"memory": "2Gi"},
            "preemption_mode": "",
            "adjustments": "",
            "peak_memory_bytes": 0,
            "cpu_seconds": 0.0,
        }
        yield run, transitions, attempt


def load(url: str, spread: Spread) -> float:
    """The runs into a fresh database at ``url`` (migrated first); seconds it took."""
    began = time.perf_counter()
    engine = connect(url)
    indexes = [*RUNS.indexes, *LABELS.indexes]
    with engine.begin() as connection:
        for index in indexes:
            index.drop(connection)
    counts = Counter(zip(spread.project, spread.owner, spread.state, strict=True))
    count_rows = [
        {"project": p, "owner": o, "state": s, "runs": n} for (p, o, s), n in counts.items()
    ]
    if engine.dialect.name == "postgresql":
        _copy(engine, spread)
    else:
        _insert(engine, spread)
    with engine.begin() as connection:
        connection.execute(COUNTS.insert(), count_rows)
        for index in indexes:
            index.create(connection)
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("VACUUM ANALYZE")
    engine.dispose()
    return time.perf_counter() - began


def _copy(engine: Any, spread: Spread) -> None:
    """PostgreSQL's COPY, a table at a time, foreign keys checked by construction."""
    tables = (RUNS, TRANSITIONS, ATTEMPTS, LABELS)
    columns = {table.name: [c.name for c in table.columns if c.name != "id"] for table in tables}
    raw = engine.raw_connection()
    try:
        cursor = raw.driver_connection.cursor()
        cursor.execute("SET session_replication_role = replica")  # no FK triggers per row
        copies = {
            name: f"COPY {name} ({', '.join(names)}) FROM STDIN" for name, names in columns.items()
        }

        def value(v: Any) -> Any:
            return json.dumps(v) if isinstance(v, dict) else v

        with cursor.copy(copies["runs"]) as runs:
            for run, _, _ in _rows(spread):
                runs.write_row([value(run[c]) for c in columns["runs"]])
        with cursor.copy(copies["run_transitions"]) as out:
            for _, transitions, _ in _rows(spread):
                for t in transitions:
                    out.write_row([t[c] for c in columns["run_transitions"]])
        with cursor.copy(copies["run_attempts"]) as out:
            for _, _, attempt in _rows(spread):
                out.write_row([value(attempt.get(c)) for c in columns["run_attempts"]])
        with cursor.copy(copies["run_labels"]) as out:
            for i, uid in enumerate(spread.uids):
                for key, label in spread.labels[i].items():
                    row = {"run_uid": uid, "key": key, "value": label}
                    row |= {"project": spread.project[i], "owner": spread.owner[i]}
                    row["created_at"] = spread.created[i]
                    out.write_row([row[c] for c in columns["run_labels"]])
        cursor.execute("SET session_replication_role = DEFAULT")
        raw.commit()
    finally:
        raw.close()


def _insert(engine: Any, spread: Spread) -> None:
    """SQLite: executemany in batches, one transaction."""
    batch = 5000
    with engine.begin() as connection:
        runs: list[dict[str, Any]] = []
        transitions: list[dict[str, Any]] = []
        attempts: list[dict[str, Any]] = []
        labels: list[dict[str, Any]] = []
        for n, (run, moves, attempt) in enumerate(_rows(spread)):
            runs.append(run)
            transitions += moves
            attempts.append(attempt)
            labels += (
                {"run_uid": run["uid"], "key": k, "value": v, "created_at": run["created_at"]}
                | {"project": run["project"], "owner": run["owner"]}
                for k, v in spread.labels[n].items()
            )
            if len(runs) == batch or n == len(spread.uids) - 1:
                for table, rows in (
                    (RUNS, runs),
                    (TRANSITIONS, transitions),
                    (ATTEMPTS, attempts),
                    (LABELS, labels),
                ):
                    connection.execute(table.insert(), rows)
                    rows.clear()


@dataclass(frozen=True, slots=True)
class Query:
    """One list query: its API parameters, whose token, and the runs it must answer."""

    name: str
    params: dict[str, Any]
    token: str = ADMIN_TOKEN
    expected: Callable[[], list[str]] | None = None
    counts: bool = False
    ui: str = ""


def _cursor(key: tuple[float, str]) -> str:
    return base64.urlsafe_b64encode(f"{key[0]!r} {key[1]}".encode()).decode()


def queries(spread: Spread) -> list[Query]:
    n = len(spread.uids)
    middle = n // 2
    deep = (spread.created[middle], spread.uids[middle])
    project = "proj-00"
    in_project = [i for i in range(n) if spread.project[i] == project]
    deep_project_i = in_project[len(in_project) // 2]
    deep_project = (spread.created[deep_project_i], spread.uids[deep_project_i])
    since = spread.created[-1] - 30 * 86400
    window = (since - 86400, since)
    s = spread
    return [
        Query("first page", {}, expected=lambda: s.newest(lambda i: True)),
        Query(
            "deep page (cursor, half-way)",
            {"cursor": _cursor(deep)},
            expected=lambda: s.newest(lambda i: True, deep),
        ),
        Query(
            "project",
            {"project": project},
            expected=lambda: s.newest(lambda i: s.project[i] == project),
            ui=f"/ui/projects/{project}/jobs",
        ),
        Query(
            "project, deep page",
            {"project": project, "cursor": _cursor(deep_project)},
            expected=lambda: s.newest(lambda i: s.project[i] == project, deep_project),
            ui=f"/ui/projects/{project}/jobs?after={_cursor(deep_project)}&page=2",
        ),
        Query(
            "state=running",
            {"state": "running"},
            expected=lambda: s.newest(lambda i: s.state[i] == "running"),
        ),
        Query(
            "state=error",
            {"state": "error"},
            expected=lambda: s.newest(lambda i: s.state[i] == "error"),
        ),
        Query(
            "project + state=error",
            {"project": project, "state": "error"},
            expected=lambda: s.newest(lambda i: s.project[i] == project and s.state[i] == "error"),
            ui=f"/ui/projects/{project}/jobs?state=error",
        ),
        Query(
            "owner (admin)",
            {"owner": "user-003"},
            expected=lambda: s.newest(lambda i: s.owner[i] == "user-003"),
        ),
        Query(
            "a user's own", {}, USER_TOKEN, expected=lambda: s.newest(lambda i: s.owner[i] == USER)
        ),
        Query(
            "a user's own in a project",
            {"project": project},
            USER_TOKEN,
            expected=lambda: s.newest(lambda i: s.owner[i] == USER and s.project[i] == project),
            ui=f"/ui/projects/{project}/jobs",
        ),
        Query(
            "name", {"name": "fn-001"}, expected=lambda: s.newest(lambda i: s.name[i] == "fn-001")
        ),
        Query(
            "label team=team-3",
            {"label": "team=team-3"},
            expected=lambda: s.newest(lambda i: s.labels[i]["team"] == "team-3"),
        ),
        Query(
            "label team + tier",
            {"label": ["team=team-3", "tier=prod"]},
            expected=lambda: s.newest(
                lambda i: s.labels[i]["team"] == "team-3" and s.labels[i]["tier"] == "prod"
            ),
        ),
        Query(
            "rare label experiment=exp-7",
            {"label": "experiment=exp-7"},
            expected=lambda: s.newest(lambda i: s.labels[i].get("experiment") == "exp-7"),
        ),
        Query(
            "a user's own, label",
            {"label": "team=team-3"},
            USER_TOKEN,
            expected=lambda: s.newest(
                lambda i: s.owner[i] == USER and s.labels[i]["team"] == "team-3"
            ),
            ui=f"/ui/projects/{project}/jobs?label=team%3Dteam-3",
        ),
        Query(
            "created in one day, a month ago",
            {"created_since": window[0], "created_until": window[1]},
            expected=lambda: s.newest(lambda i: window[0] <= s.created[i] < window[1]),
        ),
        Query("counts (all)", {}, counts=True),
        Query("counts (a user's, a project)", {"project": project}, USER_TOKEN, counts=True),
    ]


def start(url: str, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    tokens = [
        {"token": ADMIN_TOKEN, "user": "alice", "role": "admin"},
        {"token": USER_TOKEN, "user": USER, "role": "user"},
    ]
    env |= {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(work / "home"),
        "RUNPLANE_SERVICE__DATABASE_URL": url,
        "RUNPLANE_SERVICE__TOKENS": json.dumps(tokens),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    return serve.start_service(env, work / "service.log", timeout=300)


def _get(client: httpx.Client, query: Query) -> httpx.Response:
    path = "/api/v1/runs/counts" if query.counts else "/api/v1/runs"
    answer = client.get(
        path, params=query.params, headers={"Authorization": f"Bearer {query.token}"}
    )
    answer.raise_for_status()
    return answer


def check(base: str, spread: Spread) -> list[str]:
    """Every query's answer against the runs as generated; what differs (empty if nothing)."""
    wrong = []
    with httpx.Client(base_url=base, timeout=60) as client:
        for query in queries(spread):
            answer = _get(client, query).json()
            if query.counts:
                owner = USER if query.token == USER_TOKEN else None
                project = query.params.get("project")
                total = sum(
                    1
                    for i in range(len(spread.uids))
                    if (owner is None or spread.owner[i] == owner)
                    and (project is None or spread.project[i] == project)
                )
                if answer["total"] != total:
                    wrong.append(f"{query.name}: {answer['total']} runs counted, {total} made")
                continue
            got = [run["uid"] for run in answer]
            expected = query.expected() if query.expected else []
            if got != expected:
                wrong.append(f"{query.name}: {len(got)} runs, not the {len(expected)} expected")
    return wrong


def check_cli(base: str, spread: Spread) -> list[str]:
    """``runplane runs`` against the service, two pages of a project from the cursor it
    prints; what differs from the runs as generated."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env |= {"RUNPLANE_CONFIG": os.devnull, "RUNPLANE_API": base, "RUNPLANE_TOKEN": ADMIN_TOKEN}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    expected = spread.newest(lambda i: spread.project[i] == "proj-00")[:10]
    shown: list[str] = []
    after: list[str] = []
    for _ in range(2):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "runplane",
                "runs",
                "--project",
                "proj-00",
                "--limit",
                "5",
                *after,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        shown += [line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()]
        after = ["--after", done.stderr.split("--after", 1)[1].split()[0]]
    if shown != [uid[:12] for uid in expected]:
        return [f"runplane runs: {shown} shown, {[u[:12] for u in expected]} expected"]
    return []


def check_ui(base: str, spread: Spread) -> list[str]:
    """The UI's runs page and the page its "Next page" link leads to, as a user: the rows the
    runs as generated say, in order."""
    import html
    import re

    def mine(i: int) -> bool:
        return spread.project[i] == "proj-00" and spread.owner[i] == USER

    first = spread.newest(mine)
    second = spread.newest(mine, (spread.created[spread.uids.index(first[-1])], first[-1]))
    wrong = []
    with httpx.Client(base_url=base, timeout=60) as client:
        log_in(client, USER_TOKEN)
        page = client.get("/ui/projects/proj-00/jobs").text
        for expected in (first, second):
            rows = re.findall(r'<tr id="run-([0-9a-f]{32})"', page)
            if rows != expected:
                wrong.append(f"UI: {len(rows)} rows, not the {len(expected)} expected")
                break
            link = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page)
            if link is None:
                break
            page = client.get(html.unescape(link[1])).text
    return wrong


def _load() -> str:
    """The machine's load, which the latencies depend on (the service's CPU does not)."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min)"


def _cpu(process: psutil.Process) -> float:
    """The process's CPU seconds so far, its threads' and children's."""
    times = process.cpu_times()
    return times.user + times.system + times.children_user + times.children_system


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{p50 * 1000:7.1f} | {p99 * 1000:7.1f} | {ordered[-1] * 1000:7.1f}"


def _postgres_server(url: str) -> psutil.Process | None:
    """The PostgreSQL server of ``url`` when it runs on this machine (its postmaster, found by
    the port it listens on), else ``None``."""
    from sqlalchemy.engine import make_url

    where = make_url(url)
    if not where.drivername.startswith("postgresql"):
        return None
    if where.host not in (None, "", "localhost", "127.0.0.1", "::1"):
        return None
    port = where.port or 5432
    for found in psutil.process_iter(["name"]):
        if not (found.info["name"] or "").startswith("postgres"):
            continue
        try:
            if any(c.laddr and c.laddr.port == port for c in found.net_connections("tcp")):
                return found
        except psutil.Error:
            continue
    return None


def _tree_cpu(process: psutil.Process) -> float:
    """CPU seconds of a process and its children so far (PostgreSQL's backends, its writers)."""
    spent = _cpu(process)
    for child in process.children(recursive=True):
        try:
            spent += _cpu(child)
        except psutil.Error:  # ended meanwhile
            continue
    return spent


def time_idle(service: psutil.Process, url: str, seconds: float) -> None:
    """What the service and the database spend while nobody asks anything: its background
    looks (the monitors' polls), which at a million runs must not grow with the runs."""
    server = _postgres_server(url)
    database, own = (_tree_cpu(server) if server else 0.0), _cpu(service)
    time.sleep(seconds)
    own = _cpu(service) - own
    spent = f"PostgreSQL's {_tree_cpu(server) - database:.2f} s" if server else "no local server"
    print(f"\nidle {seconds:g} s: the service's CPU {own:.2f} s (SQLite's within it); {spent}")


def time_api(base: str, spread: Spread, requests: int, service: psutil.Process) -> None:
    """Latency as a client sees it, and the service process's own CPU per request (what the
    machine's other load does not change)."""
    print(f"\nAPI over loopback, {requests} requests each (ms; runs answered):")
    print("| query | p50 | p99 | max | service CPU | runs |\n|---|---|---|---|---|---|")
    with httpx.Client(base_url=base, timeout=60) as client:
        for query in queries(spread):
            for _ in range(3):
                _get(client, query)  # warm
            samples = []
            cpu = _cpu(service)
            for _ in range(requests):
                began = time.perf_counter()
                answer = _get(client, query)
                samples.append(time.perf_counter() - began)
            spent = (_cpu(service) - cpu) / requests * 1000
            shown = answer.json()["total"] if query.counts else len(answer.json())
            print(f"| {query.name} | {percentiles(samples)} | {spent:5.1f} | {shown} |")


def log_in(client: httpx.Client, token: str) -> None:
    """A UI session for ``token``, as the login form makes one (its nonce, then a POST)."""
    form = re.search(r'name="nonce" value="([^"]+)"', client.get("/ui/login").text)
    assert form is not None, "the login page has no form"
    answer = client.post("/ui/login", data={"nonce": form[1], "token": token})
    assert answer.status_code == 303, f"login refused: {answer.status_code} {answer.text[:200]}"


def time_ui_http(base: str, spread: Spread, requests: int, service: psutil.Process) -> None:
    print(f"\nUI runs page, server answer over loopback, {requests} requests each (ms):")
    print("| page | as | p50 | p99 | max | service CPU |\n|---|---|---|---|---|---|")
    for query in queries(spread):
        if not query.ui:
            continue
        with httpx.Client(base_url=base, timeout=60) as client:
            log_in(client, query.token)
            for _ in range(3):
                client.get(query.ui).raise_for_status()
            samples = []
            cpu = _cpu(service)
            for _ in range(requests):
                began = time.perf_counter()
                client.get(query.ui).raise_for_status()
                samples.append(time.perf_counter() - began)
            spent = (_cpu(service) - cpu) / requests * 1000
        who = "user" if query.token == USER_TOKEN else "admin"
        print(f"| `{query.ui[:70]}` | {who} | {percentiles(samples)} | {spent:5.1f} |")


def time_ui_browser(
    base: str, spread: Spread, loads: int, baseline_script: Path | None = None
) -> None:
    """Chromium's own navigation timing (start to load event), and the list swapped in place.

    With ``baseline_script``, the in-place timings run in two tabs by turns, the second served
    that file as the UI's ``runplane.js``: a change to the page's script against the one before,
    on the same server and browser at the same moments.
    """
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    print(f"\nChromium (Playwright), navigation start to load event, {loads} loads each (ms;")
    print("first byte: navigation start to the answer's first byte, the server's share):")
    print("| page | as | p50 | p99 | max | first byte p50 | p99 |\n|---|---|---|---|---|---|---|")
    in_page: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        for token in (ADMIN_TOKEN, USER_TOKEN):
            page = _logged_in(browser, base, token)
            who = "user" if token == USER_TOKEN else "admin"
            for query in queries(spread):
                if not query.ui or query.token != token:
                    continue
                samples, first = [], []
                for _ in range(loads):
                    page.goto(f"{base}{query.ui}", wait_until="load")
                    took, answered = page.evaluate(_NAVIGATION)
                    samples.append(took / 1000)
                    first.append(answered / 1000)
                print(f"| `{query.ui[:70]}` | {who} | {_split(samples, first)} |")
            tabs = {who: page}
            if baseline_script is not None:
                # Both tabs are served their script through the same route (a routed tab
                # caches nothing and intercepts every request: both bear it alike).
                tabs = {
                    who: _logged_in(browser, base, token, _SCRIPT.read_text()),
                    f"{who}, baseline script": _logged_in(
                        browser, base, token, baseline_script.read_text()
                    ),
                }
            in_page += _time_in_page(base, tabs, loads)
            if token == ADMIN_TOKEN:
                # The browser's own floor on this machine: a page whose server answer reads
                # no run, with the same layout, stylesheet and scripts.
                samples, first = [], []
                for _ in range(loads):
                    page.goto(f"{base}/ui/settings", wait_until="load")
                    took, answered = page.evaluate(_NAVIGATION)
                    samples.append(took / 1000)
                    first.append(answered / 1000)
                floor = "reference: `/ui/settings`, no run read"
                print(f"| {floor} | {who} | {_split(samples, first)} |")
            for tab in {page, *tabs.values()}:
                tab.context.close()
        browser.close()
    print("\nChromium, in the page: from the click (or the filter's change) to the list swapped in")
    print("and the next frame drawn, as htmx does it (ms). Script: Chromium's own count of the")
    print("tab's script time while a swap is timed; answer: from the click to the answer's last")
    print("byte; answer of the slowest: that time in the slowest swap.")
    print("| what | as | p50 | p99 | max | script p50 | answer p50 | answer of the slowest |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(in_page))


def _logged_in(browser: Any, base: str, token: str, script: str | None = None) -> Any:
    """A tab of its own context, logged in with ``token``; ``script``: the UI's script in
    place of the service's."""
    context = browser.new_context()
    page = context.new_page()
    if script is not None:
        page.route(
            "**/static/runplane.js*",
            lambda route: route.fulfill(body=script, content_type="text/javascript"),
        )
    page.goto(f"{base}/ui/login")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/ui/")
    return page


def _time_in_page(base: str, tabs: dict[str, Any], loads: int) -> list[str]:
    """Next page clicked 10 times from the first, then a state chosen ``loads`` times, in each
    tab by turns (each round's first tab alternates); a table row per tab and timing, with
    the median of Chromium's own count of script time per swap (its performance metrics)."""
    jobs = f"{base}/ui/projects/proj-00/jobs"
    states = ["error", "running"]
    timings: dict[str, list[dict[str, Any]]] = {
        "Next page, clicked 10 times from the first": [{"page": True}] * 10,
        "State chosen in the filters, error and running in turn": [
            {"state": states[i % 2]} for i in range(loads)
        ],
    }
    metrics = {name: tab.context.new_cdp_session(tab) for name, tab in tabs.items()}
    for session in metrics.values():
        session.send("Performance.enable")

    def script_seconds(name: str) -> float:
        counted = metrics[name].send("Performance.getMetrics")["metrics"]
        return float(next(m["value"] for m in counted if m["name"] == "ScriptDuration"))

    rows = []
    for what, clicks in timings.items():
        samples: dict[str, list[tuple[float, float | None, float]]] = {name: [] for name in tabs}
        for tab in tabs.values():
            tab.goto(jobs, wait_until="load")
        for i, click in enumerate(clicks):
            for name in list(tabs)[:: 1 if i % 2 == 0 else -1]:
                before = script_seconds(name)
                drawn, answered = tabs[name].evaluate(_IN_PAGE, click)
                script = script_seconds(name) - before
                answer = None if answered is None else answered / 1000
                samples[name].append((drawn / 1000, answer, script))
        for name, taken in samples.items():
            answered = [t[1] for t in taken if t[1] is not None]  # None: no request seen
            answers = f"{statistics.median(answered) * 1000:5.1f}" if answered else "n/a"
            slowest = max(taken)[1]
            at_slowest = "n/a" if slowest is None else f"{slowest * 1000:5.1f}"
            scripts = statistics.median(t[2] for t in taken) * 1000
            rows.append(
                f"| {what} | {name} | {percentiles([t[0] for t in taken])} | {scripts:5.1f} "
                f"| {answers} | {at_slowest} |"
            )
        if len(samples) == 2:
            ours, theirs = (statistics.median(t[0] for t in v) for v in samples.values())
            ratio = f"{ours / theirs:.2f}x"
            rows.append(f"| {what}: p50 against the baseline script | | {ratio} | | | | | |")
    return rows


#: The list swapped in place, timed in the page: from the click on Next page (or ``state``
#: chosen in the filters) to htmx's ``afterSwap`` of the answer, then the next frame drawn;
#: and to the answer's last byte (the server's and the network's share of it). It answers
#: once htmx has also settled the new list (its links are live only then).
_IN_PAGE = """(what) => new Promise((resolve) => {
  performance.clearResourceTimings();
  const began = performance.now();
  let drawn = null, settled = false;
  const answered = () => {  // the list's answer read whole, by the same clock
    const asked = performance.getEntriesByType("resource")
      .filter((e) => e.initiatorType === "xmlhttprequest").pop();
    return asked ? asked.responseEnd - began : null;
  };
  const done = () => { if (drawn !== null && settled) { resolve([drawn, answered()]); } };
  document.body.addEventListener("htmx:afterSwap", () => requestAnimationFrame(() =>
    setTimeout(() => { drawn = performance.now() - began; done(); }, 0)), { once: true });
  document.body.addEventListener("htmx:afterSettle", () => { settled = true; done(); },
    { once: true });
  if (what.page) {  // Next page; at the last, First page
    (document.getElementById("next-page") || document.getElementById("first-page")).click();
    return;
  }
  const state = document.getElementById("state");
  state.value = what.state;
  state.dispatchEvent(new Event("change", { bubbles: true }));
})"""

_NAVIGATION = (
    "() => { const n = performance.getEntriesByType('navigation')[0];"
    " return [n.loadEventEnd - n.startTime, n.responseStart - n.startTime]; }"
)


def _split(samples: list[float], first: list[float]) -> str:
    """The whole load's percentiles, then its first byte's p50 and p99."""
    ordered = sorted(first)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{percentiles(samples)} | {ordered[len(ordered) // 2] * 1000:7.1f} | {p99 * 1000:7.1f}"


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A PostgreSQL server of its own (scripts/postgres.sh, another data directory and port:
    under /tmp, where the server's own user can reach it), removed after."""
    port = serve.free_port()
    data = Path(tempfile.gettempdir()) / f"runplane-listing-pg-{port}"
    env = os.environ | {"RUNPLANE_PG_DATA": str(data), "RUNPLANE_PG_PORT": str(port)}
    script = str(ROOT / "scripts" / "postgres.sh")
    started = subprocess.run(["bash", script, "start"], env=env, capture_output=True, text=True)
    if started.returncode:
        raise RuntimeError(f"PostgreSQL did not start: {started.stderr[-2000:]}")
    url = started.stdout.strip().split("=", 1)[1]
    try:
        yield url
    finally:
        subprocess.run(["bash", script, "stop"], env=env, capture_output=True, check=False)
        shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="default 1,000,000 (SQLite 100,000)")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--sqlite", action="store_true", help="SQLite instead of PostgreSQL")
    parser.add_argument("--database-url", help="an empty PostgreSQL database to load")
    parser.add_argument("--no-browser", action="store_true", help="leave Chromium out")
    parser.add_argument("--check", action="store_true", help="check every answer too")
    parser.add_argument(
        "--baseline-script",
        type=Path,
        help="time the list swapped in place against this runplane.js too (another version's)",
    )
    parser.add_argument(
        "--load-only",
        action="store_true",
        help="load --database-url and stop (then time it with --loaded, under the bench lock)",
    )
    parser.add_argument(
        "--loaded",
        action="store_true",
        help="--database-url already holds this command's runs (a run before loaded them)",
    )
    args = parser.parse_args()
    runs = args.runs or (100_000 if args.sqlite else 1_000_000)
    print(f"# listing {runs:,} recorded runs ({'SQLite' if args.sqlite else 'PostgreSQL'})")
    print(f"command: python {' '.join(sys.argv)}")
    print(f"machine: {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}, {_load()}")
    began = time.perf_counter()
    spread = generate(runs)
    print(f"generated in {time.perf_counter() - began:.1f} s")
    with tempfile.TemporaryDirectory(prefix="run-listing-") as directory:
        work = Path(directory)
        with (
            throwaway_postgres()
            if not (args.sqlite or args.database_url)
            else _given(args.database_url or f"sqlite:///{work / 'runs.db'}")
        ) as url:
            if url.startswith("postgresql") and not args.database_url:
                url = _fresh(url)
            if not args.loaded:
                took = load(url, spread)
                after = "; VACUUM ANALYZE" if url.startswith("postgresql") else ""
                print(f"loaded in {took:.1f} s (indexes built after the rows{after})")
            if args.load_only:
                return
            process, base = start(url, work)
            try:
                if args.check:
                    wrong = check(base, spread) + check_cli(base, spread) + check_ui(base, spread)
                    print("answers checked:", wrong if wrong else "all as generated")
                service = psutil.Process(process.pid)
                time_idle(service, url, 10.0)
                time_api(base, spread, args.requests, service)
                time_ui_http(base, spread, args.requests, service)
                print(f"\n{_load()}")
                if not args.no_browser:
                    time_ui_browser(base, spread, min(args.requests, 20), args.baseline_script)
            finally:
                process.terminate()
                process.wait(timeout=60)


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


def _fresh(url: str) -> str:
    """A new database on the server at ``url``."""
    from sqlalchemy import create_engine

    name = f"listing_{random.getrandbits(32):08x}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    admin.dispose()
    return url.rsplit("/", 1)[0] + f"/{name}"


if __name__ == "__main__":
    main()

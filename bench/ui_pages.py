"""How fast the web UI's pages answer with a testbed-sized history: 1,000 runs.

Records ``--runs`` finished runs (with transitions, an attempt, results and an embedded
function, as real runs leave them) in a fresh database, starts ``runplane serve`` as its own
process, logs in with a token, and times every page over HTTP on loopback (the server's whole
answer: auth, queries, rendering). Then Debian's Chromium loads the runs list and a run's page
and reports when the page was ready, from the browser's own navigation timing.

    python bench/ui_pages.py [--runs 1000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

import httpx
from common import header, summary

from runplane.runs import RunState, Usage
from runplane.runtimes.events import RunEvent
from runplane.service.catalog import FunctionCatalog
from runplane.service.db import connect, sqlite_url
from runplane.service.records import RunStore
from runplane.spec.function import Function
from testbed import serve

TOKEN = "bench-ui-token-0123456789"
PROJECT = "bench"
CODE = (
    "import time\n\n\ndef train(context, epochs: int = 1, rate: float = 0.1):\n"
    + "".join(f"    # step {n}: a comment standing for a real handler's body\n" for n in range(20))
    + "    return {'accuracy': 0.9, 'epochs': epochs}\n"
)
STATES = [RunState.COMPLETED] * 8 + [RunState.ERROR, RunState.ABORTED]


def seed(home: Path, runs: int) -> str:
    """``runs`` finished runs and a few stored functions; returns one run's uid."""
    engine = connect(sqlite_url(home / "runplane.db"))
    store = RunStore(engine)
    function = Function.from_dict(
        {
            "kind": "job",
            "metadata": {"name": "train", "project": PROJECT},
            "spec": {
                "handler": "train",
                "build": {"source": base64.b64encode(CODE.encode()).decode(), "filename": "t.py"},
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
            },
        }
    )
    catalog = FunctionCatalog(engine)
    for n in range(10):
        copy = function.model_copy(deep=True)
        copy.metadata.name = f"train-{n}"
        catalog.store(copy, "bench")
    rng = random.Random(7)
    uid = ""
    start = time.time() - runs * 60
    for n in range(runs):
        uid = f"{n:032x}"
        store.create(
            uid=uid,
            project=PROJECT,
            name="train",
            runtime="local",
            function=function.to_dict(),
            params={"epochs": rng.randint(1, 50), "rate": 0.1},
            inputs={},
            thresholds={"running": "24h"},
            priority_class="medium",
            requests={"cpu": "500m", "memory": "1Gi"},
            limits={"memory": "2Gi"},
            executor=None,
            owner="alice",
        )
        at = start + n * 60
        end = rng.choice(STATES)
        store.apply_many(
            [
                RunEvent(uid, RunState.PENDING, reason="Pending", at=at),
                RunEvent(uid, RunState.RUNNING, reason="Started", node="node-1", at=at + 1),
                RunEvent(
                    uid,
                    end,
                    reason=end.value.capitalize(),
                    exit_code=0 if end is RunState.COMPLETED else 1,
                    results={"accuracy": 0.9} if end is RunState.COMPLETED else {},
                    usage=Usage(512 << 20, 12.5),
                    at=at + rng.uniform(5, 50),
                ),
            ]
        )
    engine.dispose()
    return uid


def browser_times(url: str, paths: list[str], repeat: int) -> dict[str, list[float]]:
    """Seconds from navigation start to the load event, per page, as Chromium measures."""
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    times: dict[str, list[float]] = {path: [] for path in paths}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        page.goto(f"{url}/ui/login")
        page.get_by_label("Token").fill(TOKEN)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{url}/ui/")
        for path in paths:
            for _ in range(repeat):
                page.goto(f"{url}{path}", wait_until="load")
                entry = page.evaluate(
                    "() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return n.loadEventEnd - n.startTime; }"
                )
                times[path].append(entry / 1000)
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    header(f"web UI pages with {args.runs} runs")
    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory) / "home"
        home.mkdir(mode=0o700)
        seeded = time.perf_counter()
        uid = seed(home, args.runs)
        print(f"seeded {args.runs} runs in {time.perf_counter() - seeded:.1f} s (SQLite)")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
        env.update(
            {
                "RUNPLANE_CONFIG": os.devnull,
                "RUNPLANE_LOCAL__HOME": str(home),
                "RUNPLANE_SERVICE__TOKENS": f'[{{"token": "{TOKEN}", "user": "alice", '
                '"role": "admin"}]',
            }
        )
        process, url = serve.start_service(env, Path(directory) / "service.log")
        try:
            pages = [
                "/ui/",
                f"/ui/projects/{PROJECT}/jobs",
                f"/ui/projects/{PROJECT}/jobs?name=train",
                f"/ui/projects/{PROJECT}/jobs?state=error",
                f"/ui/runs/{uid}",
                f"/ui/projects/{PROJECT}/jobs/new",
                f"/ui/projects/{PROJECT}/functions",
                f"/ui/projects/{PROJECT}/schedules",
                f"/ui/projects/{PROJECT}/settings",
                f"/ui/projects/{PROJECT}/serving/new",
                "/ui/new-project",
                "/ui/settings",
                "/ui/cluster",
            ]
            with httpx.Client(base_url=url) as client:
                form = re.search(r'name="nonce" value="([^"]+)"', client.get("/ui/login").text)
                assert form is not None
                client.post("/ui/login", data={"nonce": form[1], "token": TOKEN})
                print(f"\nserver answer over loopback, {args.repeat} requests each:")
                print("| page | time |\n|---|---|")
                for path in pages:
                    client.get(path).raise_for_status()  # warm
                    samples = []
                    for _ in range(args.repeat):
                        began = time.perf_counter()
                        answer = client.get(path)
                        samples.append(time.perf_counter() - began)
                        answer.raise_for_status()
                    print(f"| `{path}` | {summary(samples)} |")
            loaded = [f"/ui/projects/{PROJECT}/jobs", f"/ui/runs/{uid}"]
            print(f"\nChromium, navigation start to load event, {min(args.repeat, 10)} loads each:")
            print("| page | time |\n|---|---|")
            for path, samples in browser_times(url, loaded, min(args.repeat, 10)).items():
                print(f"| `{path}` | {summary(samples)} |")
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()

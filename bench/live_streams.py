"""What idle live streams cost the service, and how the API answers others meanwhile.

Starts ``runplane serve`` as its own process (limits on streams raised to ``--streams`` when
this runplane has them), runs one sleeping run, logs a user in, and opens ``--streams`` streams
of the run's output (a page each, left open, as idle browsers leave them). Then it reports the
service's CPU time per second while they wait, and how long ``/health`` and ``GET /runs`` take
for another user.

    python bench/live_streams.py [--streams 2000] [--seconds 10] [--repeat 40]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).parent))

import httpx
import psutil
from common import header, summary

import runplane
from runplane.config import Service
from testbed import serve

TOKENS = {"flood": "bench-streams-flood-token", "other": "bench-streams-other-token"}
SLEEPER = "import time\n\ndef handler(context):\n    time.sleep(3600)\n"


def login(url: str) -> str:
    with httpx.Client(base_url=url) as browser:
        nonce = browser.get("/ui/login").cookies["runplane_login"]
        done = browser.post("/ui/login", data={"nonce": nonce, "token": TOKENS["flood"]})
        return str(done.cookies["runplane_session"])


def open_stream(url: str, path: str, session: str) -> tuple[int, socket.socket]:
    host, port = url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=120)
    connection.sendall(
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\n"
        f"Cookie: runplane_session={session}\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += connection.recv(4096)
    status = re.match(rb"HTTP/1.1 (\d+)", head)
    return int(status.group(1)) if status else 0, connection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    header(f"{args.streams} idle live streams of one run")
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
        env |= {
            "RUNPLANE_CONFIG": os.devnull,
            "RUNPLANE_LOCAL__HOME": str(home / "home"),
            "RUNPLANE_SERVICE__TOKENS": json.dumps(
                [{"token": token, "user": user} for user, token in TOKENS.items()]
            ),
        }
        if "live_streams" in Service.model_fields:
            env["RUNPLANE_SERVICE__LIVE_STREAMS__PER_USER"] = str(args.streams)
            env["RUNPLANE_SERVICE__LIVE_STREAMS__TOTAL"] = str(args.streams)
        process, url = serve.start_service(env, home / "service.log")
        opened: list[socket.socket] = []
        try:
            (home / "sleeper.py").write_text(SLEEPER)
            fn = runplane.code_to_function(
                "sleeper", filename=str(home / "sleeper.py"), handler="handler"
            )
            fn.with_requests(cpu="100m", mem="32Mi")
            flood = {"Authorization": f"Bearer {TOKENS['flood']}"}
            uid = httpx.post(
                f"{url}/api/v1/runs", headers=flood, json={"function": fn.to_dict()}
            ).json()["uid"]
            while (
                state := httpx.get(f"{url}/api/v1/runs/{uid}", headers=flood).json()["state"]
            ) != "running":
                if state not in ("created", "pending"):
                    raise SystemExit(f"the sleeping run ended: {state}")
                time.sleep(0.1)
            session = login(url)
            statuses = []
            for _ in range(args.streams):
                status, connection = open_stream(url, f"/ui/runs/{uid}/logs/live", session)
                statuses.append(status)
                opened.append(connection)
            print(f"streams opened: {statuses.count(200)} (refused: {statuses.count(429)})")
            time.sleep(3)
            service = psutil.Process(process.pid)
            before, started = service.cpu_times(), time.monotonic()
            time.sleep(args.seconds)
            after, took = service.cpu_times(), time.monotonic() - started
            used = (after.user + after.system - before.user - before.system) / took
            print(f"service CPU while the streams wait: {used * 100:.1f} % of a core")
            other = {"Authorization": f"Bearer {TOKENS['other']}"}
            with httpx.Client(base_url=url, headers=other, timeout=120) as client:
                for path in ("/api/v1/health", "/api/v1/runs"):
                    samples = []
                    for _ in range(args.repeat):
                        begun = time.perf_counter()
                        client.get(path).raise_for_status()
                        samples.append(time.perf_counter() - begun)
                    print(f"| `{path}` | {summary(samples)}, max {max(samples) * 1000:.1f} |")
        finally:
            for connection in opened:
                connection.close()
            process.kill()
            process.wait()


if __name__ == "__main__":
    main()

"""``runplane serve`` as a separate process, for tests and benchmarks that need a real one
(a SIGKILL, clients in other processes, the service's own memory and CPU)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_service(
    env: dict[str, str],
    log: Path,
    timeout: float = 60.0,
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``runplane serve`` on a free loopback port; returns the process and its base URL
    (``http://127.0.0.1:PORT``) once ``/api/v1/health`` answers. Output goes to ``log``."""
    port = free_port()
    with log.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "runplane", "serve", "--port", str(port)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/api/v1/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"runplane serve did not start: {log.read_text(errors='replace')[-2000:]}")

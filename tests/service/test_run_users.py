"""Runs under ``runplane serve`` as root run as users of their own: a run cannot read the
service's environment (its tokens), its database, or another run's files."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import runplane
from runplane.client.remote import ApiBackend
from runplane.spec.run_options import RunOptions
from testbed import serve

TOKEN = "users-token-for-the-tests"
SECRET = "only-the-service-knows-this-value"
#: An interpreter every user may run (runplane's own lies under /root on this machine).
SYSTEM_PYTHON = Path("/usr/bin/python3")

HOLDER = """
import time

def handler(context, seconds: float = 30):
    print("private output of the first run", flush=True)
    time.sleep(seconds)
"""

PROBE = """
import os

def attempt(action, path):
    try:
        action(path)
        return "allowed"
    except OSError as error:
        return type(error).__name__

def read(path):
    with open(path, "rb") as file:
        file.read(1)

def handler(context, server_pid: int, database: str, other_run: str, runs: str):
    status = dict(
        line.split(":", 1) for line in open("/proc/self/status").read().splitlines()
    )
    with open(os.path.join(os.environ["HOME"], "mine.txt"), "w") as own:
        own.write("a run's own home is its own")
    return {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": os.getgroups(),
        "no_new_privs": status["NoNewPrivs"].strip(),
        "server_environ": attempt(read, f"/proc/{server_pid}/environ"),
        "database": attempt(read, database),
        "other_output": attempt(read, os.path.join(other_run, "output.log")),
        "other_dir": attempt(os.listdir, other_run),
        "runs_listing": attempt(os.listdir, runs),
    }
"""


@pytest.fixture
def reachable_home() -> Iterator[Path]:
    """A home that runs' users can pass through (pytest's own temporary directories are
    0700), removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="runplane-users-", dir="/tmp"))
    base.chmod(0o711)
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    return env | {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(home),
        "RUNPLANE_LOCAL__CPU": "2",
        "RUNPLANE_LOCAL__ISOLATION": "cgroup",
        "RUNPLANE_SERVICE__TOKENS": json.dumps([{"token": TOKEN, "user": "eve"}]),
        "SERVICE_ONLY_SECRET": SECRET,
        **extra,
    }


def function(tmp_path: Path, name: str, code: str) -> runplane.Function:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(code))
    return runplane.code_to_function(name, filename=str(path), handler="handler")


def test_a_run_cannot_read_the_service_or_another_run(reachable_home, tmp_path):
    assert os.geteuid() == 0, "this test checks runplane serve as root, as CI runs it"
    assert os.access(SYSTEM_PYTHON, os.X_OK), f"{SYSTEM_PYTHON} is needed by this test"
    env = environment(reachable_home, RUNPLANE_LOCAL__PYTHON=str(SYSTEM_PYTHON))
    process, url = serve.start_service(env, tmp_path / "service.log")
    try:
        backend = ApiBackend(url, TOKEN)
        holder = backend.submit(function(tmp_path, "holder", HOLDER)).uid
        deadline = time.monotonic() + 60
        while backend.get(holder).state != "running":
            assert time.monotonic() < deadline, backend.get(holder)
            time.sleep(0.05)
        other = reachable_home / "runs" / holder
        while b"private output" not in (other / "output.log").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        database = reachable_home / "runplane.db"
        assert database.exists()
        assert SECRET.encode() in Path(f"/proc/{process.pid}/environ").read_bytes()
        probe = backend.submit(
            function(tmp_path, "probe", PROBE),
            RunOptions(
                params={
                    "server_pid": process.pid,
                    "database": str(database),
                    "other_run": str(other),
                    "runs": str(reachable_home / "runs"),
                }
            ),
        )
        record = backend.wait(probe.uid, timeout=60)
        assert record.state == "completed", record.status_text
        seen = record.results
        first, last = 1_000_000_000, 1_000_065_535
        assert first <= seen["uid"] <= last
        assert seen["gid"] == seen["uid"]
        assert seen["groups"] == []
        assert seen["no_new_privs"] == "1"
        assert seen["server_environ"] == "PermissionError"
        assert seen["database"] == "PermissionError"
        assert seen["other_output"] == "PermissionError"
        assert seen["other_dir"] == "PermissionError"
        assert seen["runs_listing"] == "PermissionError"
        assert record.isolation == f"cgroup v1, uid {seen['uid']} (its own)"
        # Both runs were running at once, each as its own user.
        assert backend.get(holder).isolation != record.isolation
        # Once over, a run's directory is the service's again: a later run with its uid
        # cannot enter it.
        probed = reachable_home / "runs" / probe.uid
        assert (probed.stat().st_uid, stat.S_IMODE(probed.stat().st_mode)) == (0, 0o700)
        assert (probed / "home" / "mine.txt").stat().st_uid == seen["uid"]
        backend.abort(holder)
        assert backend.wait(holder, timeout=30).state == "aborted"
        shown = subprocess.run(
            [sys.executable, "-m", "runplane", "get", "run", probe.uid],
            env=env | {"RUNPLANE_API": url, "RUNPLANE_TOKEN": TOKEN},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert re.search(rf"isolation +cgroup v1, uid {seen['uid']} \(its own\)", shown), shown
    finally:
        process.terminate()
        process.wait(timeout=30)
    log = (tmp_path / "service.log").read_text()
    assert "runs are held so: limits by cgroup v1: a cgroup per run beneath " in log
    assert "each run as a user of its own (uids 1000000000-1000065535" in log


def test_serve_refuses_runs_users_could_not_start(tmp_path):
    """As root, with a home that runs' users cannot reach and ``per-run`` asked for, serve
    stops at start saying why and how to fix it, rather than run every run as root."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    env = environment(
        closed / "home",
        RUNPLANE_LOCAL__PYTHON=str(SYSTEM_PYTHON),
        RUNPLANE_LOCAL__RUN_USERS="per-run",
    )
    done = subprocess.run(
        [sys.executable, "-m", "runplane", "serve", "--port", str(serve.free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        "error: runs run as users of their own (runplane is root, local.run_users is "
        "'per-run'), "
        "and uid "
    )
    assert "cannot pass through " in done.stderr
    assert "set local.run_users: same" in done.stderr
    assert "Traceback" not in done.stderr
    assert SECRET not in done.stderr


def test_serve_in_auto_runs_as_root_saying_why_and_how_to_isolate(tmp_path):
    """``auto`` takes the best the machine allows: where runs' users cannot start a run, serve
    still starts, and says at start that runs share its user, why, and the fix."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    env = environment(closed / "home", RUNPLANE_LOCAL__PYTHON=str(SYSTEM_PYTHON))
    log_path = tmp_path / "service.log"
    process, _ = serve.start_service(env, log_path)
    try:
        text = log_path.read_text()
        assert "local.run_users: auto: runs as root, runplane's own user" in text
        assert "cannot pass through " in text
        assert "set local.run_users: per-run to refuse to start without it" in text
        assert "runs are held so: limits by cgroup v1" in text
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_as_an_ordinary_user_says_runs_share_it(reachable_home, tmp_path):
    """Without root there is no other user to give runs, nor a writable cgroup here: runplane
    serve started as ``nobody`` says both at start and holds runs with the watchdog."""
    nobody = 65534
    reachable_home.mkdir()
    os.chown(reachable_home, nobody, nobody)
    src = Path(runplane.__file__).resolve().parents[1]
    site = sysconfig.get_paths()["purelib"]
    env = environment(
        reachable_home,
        RUNPLANE_LOCAL__ISOLATION="auto",
        PYTHONPATH=f"{src}:{site}",
        HOME=str(reachable_home),
    )
    port = serve.free_port()
    log = tmp_path / "service.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(SYSTEM_PYTHON), "-m", "runplane", "serve", "--port", str(port)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            user=nobody,
            group=nobody,
            extra_groups=[],
            cwd="/",
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        backend = ApiBackend(url, TOKEN)
        quick = function(tmp_path, "quick", "def handler(context):\n    return 1\n")
        record = backend.wait(backend.submit(quick).uid, timeout=60)
        assert record.state == "completed", record.status_text
        assert record.isolation == f"watchdog, uid {nobody} (runplane's)"
    finally:
        process.terminate()
        process.wait(timeout=30)
    text = log.read_text()
    assert "runs are held so: limits by the watchdog" in text
    assert "no cgroup is writable here" in text
    assert f"runs as runplane's own user (uid {nobody}): a run can read what that user can" in (
        text
    )


SECRET_READER = """
import os
import time
from pathlib import Path

def attempt(path):
    try:
        with open(path, "rb") as file:
            return file.read().decode()
    except OSError as error:
        return type(error).__name__

def handler(context, store: str, other_copy: str, hold: float = 0):
    granted = Path(context.volume_path("/creds"))
    time.sleep(hold)
    return {
        "uid": os.getuid(),
        "granted": sorted(str(p.relative_to(granted)) for p in granted.rglob("*")),
        "password": attempt(granted / "conf" / "pw"),
        "via_link": attempt("creds/conf/pw"),
        "owner": [os.stat(granted).st_uid, os.stat(granted / "conf" / "pw").st_uid],
        "modes": [oct(os.stat(p).st_mode & 0o777) for p in (granted, granted / "conf" / "pw")],
        "store_key_not_granted": attempt(os.path.join(store, "db", "user")),
        "store_other_secret": attempt(os.path.join(store, "other", "token")),
        "other_runs_copy": attempt(other_copy),
    }
"""


def test_a_secret_volume_is_readable_by_its_own_run_only_and_only_what_it_grants(
    reachable_home, tmp_path
):
    """Runs as users of their own: each reads the copy of the keys its Secret volume grants,
    never the store (0700, runplane's), another Secret or another run's copy; the copy is
    gone when the run ends."""
    assert os.geteuid() == 0, "this test checks runplane serve as root, as CI runs it"
    store = reachable_home / "secrets"
    secrets = {"db": {"password": "pw-value", "user": "admin"}, "other": {"token": "t"}}
    for secret, values in secrets.items():
        (store / secret).mkdir(mode=0o700, parents=True)
        for key, value in values.items():
            (store / secret / key).write_text(value)
    env = environment(
        reachable_home,
        RUNPLANE_LOCAL__PYTHON=str(SYSTEM_PYTHON),
        RUNPLANE_SERVICE__TOKENS=json.dumps([{"token": TOKEN, "user": "eve", "secrets": ["db"]}]),
    )
    process, url = serve.start_service(env, tmp_path / "service.log")
    try:
        backend = ApiBackend(url, TOKEN)
        fn = function(tmp_path, "reader", SECRET_READER)
        items = [{"key": "password", "path": "conf/pw"}]
        fn.apply(runplane.mount_secret("db", "/creds", "creds", items=items))
        params = {"store": str(store), "other_copy": ""}
        holder = backend.submit(fn, RunOptions(params={**params, "hold": 600})).uid
        holders_copy = reachable_home / "runs" / holder / "secrets" / "creds" / "conf" / "pw"
        deadline = time.monotonic() + 60
        while backend.get(holder).state != "running" or not holders_copy.exists():
            assert time.monotonic() < deadline, backend.get(holder)
            time.sleep(0.05)
        probe = backend.submit(fn, RunOptions(params={**params, "other_copy": str(holders_copy)}))
        record = backend.wait(probe.uid, timeout=60)
        assert record.state == "completed", record.status_text
        seen = record.results
        assert 1_000_000_000 <= seen["uid"] <= 1_000_065_535
        assert seen["granted"] == ["conf", "conf/pw"]
        assert seen["password"] == seen["via_link"] == "pw-value"
        assert seen["owner"] == [seen["uid"], seen["uid"]]
        assert seen["modes"] == ["0o700", "0o400"]
        assert seen["store_key_not_granted"] == "PermissionError"
        assert seen["store_other_secret"] == "PermissionError"
        assert seen["other_runs_copy"] == "PermissionError"
        assert not (reachable_home / "runs" / probe.uid / "secrets").exists()
        assert holders_copy.read_text() == "pw-value"  # the holder's own copy, still its own
        backend.abort(holder)
        assert backend.wait(holder, timeout=30).state == "aborted"
        assert not (reachable_home / "runs" / holder / "secrets").exists()
    finally:
        process.terminate()
        process.wait(timeout=30)

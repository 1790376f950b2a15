"""A Secret of the local store mounted as a volume: the run reads a copy of exactly the keys the
volume grants, made as it starts and removed as it ends (runs as users of their own:
tests/service/test_run_users.py)."""

from __future__ import annotations

import os
import stat
import uuid
from pathlib import Path

import pytest

import runplane
from runplane.config import load_settings
from runplane.errors import NotFoundError
from runplane.runtimes.local.users import RunUsers
from runplane.spec.run_options import RunOptions

from .test_local_runs import wait_for

READER = """
import os
import stat
import uuid
from pathlib import Path

def handler(context, hold: float = 0):
    import time
    granted = Path(context.volume_path("/creds"))
    everything = Path(context.volume_path("/all"))
    files = sorted(str(p.relative_to(granted)) for p in granted.rglob("*") if p.is_file())
    time.sleep(hold)
    return {
        "granted": files,
        "password": (granted / "conf" / "pw").read_text(),
        "via_link": Path("creds/conf/pw").read_text(),
        "all": sorted(os.listdir(everything)),
        "mode": oct(os.stat(granted / "conf" / "pw").st_mode & 0o777),
        "dir_mode": oct(os.stat(granted).st_mode & 0o777),
        "copy": str(granted),
    }
"""


def store(home: Path, secret: str, values: dict[str, str]) -> None:
    folder = home / "secrets" / secret
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for key, value in values.items():
        (folder / key).write_text(value)


def test_a_secret_volume_is_a_copy_of_the_keys_granted_removed_at_the_end(service, make_function):
    home = service.settings.local.home
    store(home, "db", {"password": "pw-value", "user": "admin"})
    store(home, "other", {"token": "not-this-runs"})
    fn = make_function(READER)
    items = [{"key": "password", "path": "conf/pw"}]
    fn.apply(runplane.mount_secret("db", "/creds", "creds", items=items))
    fn.apply(runplane.mount_secret("db", "/all", "all"))
    uid = service.submit(fn, RunOptions(params={"hold": 600})).uid
    copies = home / "runs" / uid / "secrets"
    wait_for(lambda: copies.is_dir(), timeout=60)
    service.abort(uid)
    assert service.wait(uid, timeout=60).state == "aborted"
    assert not copies.exists()  # gone with the run, however it ended

    record = service.wait(service.submit(fn).uid, timeout=60)
    assert record.state == "completed", record.status_text
    seen = record.results
    assert seen["granted"] == ["conf/pw"]  # the key its items grant, at the path they name
    assert seen["password"] == seen["via_link"] == "pw-value"
    assert seen["all"] == ["password", "user"]  # every key of the one Secret, nothing else
    assert (seen["mode"], seen["dir_mode"]) == ("0o400", "0o700")
    assert Path(seen["copy"]).is_relative_to(home / "runs" / record.uid)
    assert not Path(seen["copy"]).exists()
    assert not (home / "runs" / record.uid / "secrets").exists()


def test_a_secret_key_the_store_lacks_is_refused_before_the_run_unless_optional(
    service, make_function
):
    home = service.settings.local.home
    store(home, "db", {"password": "pw-value"})
    fn = make_function("def handler(context):\n    return sorted(__import__('os').listdir('s'))\n")
    fn.apply(runplane.mount_secret("db", "/s", "s", items=[{"key": "token", "path": "token"}]))
    with pytest.raises(NotFoundError) as refused:
        service.submit(fn)
    assert str(refused.value) == (
        f"volume 's': secret 'db' key 'token' is not in the local secret store; create "
        f"{home}/secrets/db/token (the store is {home}/secrets/<secret>/<key>), or map 'db' in "
        "local.volumes"
    )
    optional = make_function(
        "import os\ndef handler(context):\n    return sorted(os.listdir('s'))\n", name="opt"
    )
    optional.spec.volumes = [
        {"name": "s", "secret": {"secretName": "missing", "optional": True}},
    ]
    optional.spec.volume_mounts = [{"name": "s", "mountPath": "/s"}]
    record = service.wait(service.submit(optional).uid, timeout=60)
    assert record.state == "completed", record.status_text
    assert record.results["return"] == []
    assert os.listdir(home / "secrets") == ["db"]


def test_a_copy_left_by_a_runplane_that_died_is_removed_before_its_uid_is_leased_again(
    monkeypatch, tmp_path
):
    assert os.geteuid() == 0, "per-run users need root, as CI runs"
    monkeypatch.setenv("RUNPLANE_LOCAL__RUN_USERS", "per-run")
    users = RunUsers(load_settings(), serving=True)
    key = f"left-{uuid.uuid4().hex}"
    run_dir = tmp_path / "runs" / key
    (run_dir / "secrets" / "creds").mkdir(parents=True)
    (run_dir / "secrets" / "creds" / "pw").write_text("pw-value")
    user = users.lease(key, run_dir)
    assert user is not None
    os.chown(run_dir, user.uid, user.gid)
    os.close(user.lock)  # its holder dies: the kernel ends the lock, the file still names it
    again = users.lease(key)
    try:
        assert again is not None
        assert again.uid == user.uid
        assert not (run_dir / "secrets").exists()
        assert (run_dir.stat().st_uid, stat.S_IMODE(run_dir.stat().st_mode)) == (0, 0o700)
    finally:
        RunUsers.release(again)

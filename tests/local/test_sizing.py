"""Right-sizing and costs from the command line, from the records of real runs here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HUNGRY = """\
import time

def handler(context, mib: int = 60):
    data = b"x" * (mib << 20)
    time.sleep(0.5)
    return {"held": len(data) >> 20}
"""


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runplane", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_usage_suggests_requests_and_costs_are_priced(tmp_path, monkeypatch):
    # This machine as an on-demand node of a priced group.
    monkeypatch.setenv(
        "RUNPLANE_LOCAL__NODE_LABELS",
        json.dumps({"runplane.io/node-group": "on-demand", "kubernetes.io/hostname": "here"}),
    )
    prices = {"on-demand": {"hourly_price": 3600.0, "cpu": "2", "memory": "4Gi"}}
    monkeypatch.setenv("RUNPLANE_SERVICE__NODE_GROUPS", json.dumps(prices))
    script = tmp_path / "hungry.py"
    script.write_text(HUNGRY)
    for runs in range(1, 4):
        done = cli("run", str(script), "--handler", "handler", "--cpu", "1", "--memory", "2Gi")
        assert done.returncode == 0, done.stderr
        if runs == 1:  # one run is not a pattern: nothing is suggested from it
            shown = cli("get", "function", "hungry", "--suggest")
            assert shown.returncode == 0, shown.stderr
            assert "too few runs: 1 of 3 measured attempts needed" in shown.stdout
            assert "fn.with_requests" not in shown.stdout
    shown = cli("get", "function", "hungry", "--suggest")
    assert shown.returncode == 0, shown.stderr
    assert "3 measured attempt(s); peak memory " in shown.stdout
    assert "fn.with_requests(" in shown.stdout
    assert "oversized-request (memory): requests 2Gi" in shown.stdout
    uid = cli("runs").stdout.splitlines()[1].split()[0]
    detail = cli("get", "run", uid)
    assert "realised" in detail.stdout
    assert "on on-demand nodes would have cost" in detail.stdout
    total = cli("cost", "--project", "default")
    assert total.returncode == 0, total.stderr
    assert total.stdout.startswith("3 runs of project default: ")
    assert cli("get", "function", "nothing").returncode != 0
    unpriced = cli("cost", uid, env={"RUNPLANE_SERVICE__NODE_GROUPS": "{}"})
    assert unpriced.returncode != 0
    assert "no node-group prices are configured" in unpriced.stderr

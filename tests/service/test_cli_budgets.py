"""``runplane project budget``: a project's budget shown by anyone and set by an admin through
the service (a user is refused), and on the embedded default; a bad amount refused by its flag
without a traceback; ``runplane cost --project`` and ``runplane run --estimate`` show it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.service.cli_service import ADMIN, USER, clean_env, running_service, runplane

PRICES = json.dumps({"on-demand": {"hourly_price": 0.5, "cpu": "2", "memory": "4Gi"}})


def budget(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return runplane(env, "project", "budget", *args)


def test_budgets_through_the_service(tmp_path: Path) -> None:
    with running_service(tmp_path) as url:
        made = httpx.post(
            f"{url}/api/v1/projects",
            json={"name": "team-a"},
            headers={"Authorization": f"Bearer {USER}"},
        )
        assert made.status_code == 201, made.text
        home = str(tmp_path / "client-home")
        as_user = clean_env(
            RUNPLANE_API=url,
            RUNPLANE_TOKEN=USER,
            RUNPLANE_LOCAL__HOME=home,
            RUNPLANE_SERVICE__NODE_GROUPS=PRICES,
        )
        as_admin = as_user | {"RUNPLANE_TOKEN": ADMIN}

        shown = budget(as_user, "team-a")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout == "project team-a: no budget\n"
        refused = budget(as_user, "team-a", "--amount", "500")
        assert refused.returncode == 4  # refused by permission
        assert refused.stderr.startswith("error: budget: a project's budget holds")

        done = budget(as_admin, "team-a", "--amount", "500", "--action", "hold")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("budget: project team-a spent 0.00 of 500 this month (")
        assert "at the limit: hold)" in done.stdout
        weekly = budget(as_admin, "team-a", "--period", "week")  # the other terms stay
        assert weekly.stdout.startswith("budget: project team-a spent 0.00 of 500 this week (")
        assert "at the limit: hold)" in weekly.stdout
        assert budget(as_user, "team-a").stdout == weekly.stdout

        cost = runplane(as_user, "cost", "--project", "team-a")
        assert cost.returncode == 0, cost.stderr
        assert "budget: project team-a spent 0.00 of 500 this week" in cost.stdout

        job = tmp_path / "job.py"
        job.write_text("def handler(context):\n    return 1\n")
        estimated = runplane(as_user, "run", str(job), "--handler", "handler", "--estimate")
        assert estimated.returncode == 0, estimated.stderr
        # The service's own configuration has no prices: it says so, and runs nothing.
        assert estimated.stdout == (
            "no cost to estimate: no node-group prices are configured (service.node_groups)\n"
        )
        runs = httpx.get(f"{url}/api/v1/runs", headers={"Authorization": f"Bearer {ADMIN}"}).json()
        assert runs == []

        cleared = budget(as_admin, "team-a", "--clear")
        assert cleared.returncode == 0, cleared.stderr
        assert cleared.stdout == "project team-a: no budget\n"


BAD = [
    (("--amount", "\uff15\uff10\uff10"), "--amount: '\uff15\uff10\uff10' is not valid"),
    (("--amount", "-5"), "a number from 0 to"),
    (("--period", "year"), "'year' is not one of 'day', 'week', 'month'"),
    (("--clear", "--amount", "5"), "--clear takes no --amount"),
]


def test_budgets_on_the_embedded_default_and_bad_input_refused_by_flag(tmp_path: Path) -> None:
    env = clean_env(RUNPLANE_LOCAL__HOME=str(tmp_path / "home"))
    missing = budget(env, "team-b")
    assert missing.returncode == 3  # no such project: a typo makes none
    assert "project 'team-b' does not exist" in missing.stderr
    subprocess.run(
        [sys.executable, "-c", "import runplane; runplane.get_or_create_project('team-b')"],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    for args, said in BAD:
        done = budget(env, "team-b", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert budget(env, "team-b").stdout == "project team-b: no budget\n"
    unset = budget(env, "team-b", "--action", "hold")
    assert unset.returncode == 2
    assert "project team-b has no budget yet: give --amount" in unset.stderr
    done = budget(env, "team-b", "--amount", "12.5", "--period", "day", "--action", "spot-only")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("budget: project team-b spent 0.00 of 12.5 today (")

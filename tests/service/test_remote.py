"""`runplane serve` as a real process, used by the CLI and SDK through RUNPLANE_API."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cli_service import USER, clean_env, running_service, runplane


@pytest.fixture
def service_url(tmp_path: Path) -> Iterator[str]:
    with running_service(tmp_path) as url:
        yield url


def client_env(url: str, tmp_path: Path) -> dict[str, str]:
    """The user ``bob``'s environment on a machine of their own, pointed at the service."""
    return clean_env(
        RUNPLANE_API=url, RUNPLANE_TOKEN=USER, RUNPLANE_LOCAL__HOME=str(tmp_path / "client-home")
    )


def test_cli_against_the_service(service_url, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "def train(context, epochs: int = 1):\n"
        "    context.logger.info('remote epochs %d', epochs)\n"
        "    return {'epochs': epochs}\n"
    )
    env = client_env(service_url, tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return runplane(env, *args)

    done = cli("run", str(script), "--handler", "train", "--param", "epochs=3", "--cpu", "1")
    assert done.returncode == 0, done.stderr
    assert "completed (Completed)" in done.stdout
    assert "epochs=3" in done.stdout
    assert "remote epochs 3" in done.stderr
    table = cli("runs")
    assert "train" in table.stdout
    assert "completed" in table.stdout
    uid = table.stdout.splitlines()[1].split()[0]
    assert "remote epochs 3" in cli("logs", uid).stdout
    assert cli("get", "run", uid).returncode == 0
    refused = cli("run", str(script), "--handler", "train", "--priority", "runplane-system")
    assert refused.returncode == 4  # refused by policy
    assert refused.stderr.startswith(
        "error: priority_class_name: 'runplane-system' is a system class reserved for core services"
    )
    # The client's own machine ran nothing: the runs live in the service's home.
    assert not (tmp_path / "client-home" / "runs").exists()


def test_sdk_against_the_service(service_url, tmp_path):
    (tmp_path / "slow.py").write_text(
        textwrap.dedent("""
        import time

        def handler(context, seconds: float = 1):
            time.sleep(seconds)
            return {"slept": seconds}
    """)
    )
    program = textwrap.dedent(f"""
        import runplane, time
        fn = runplane.code_to_function("slow", filename={str(tmp_path / "slow.py")!r},
                                       handler="handler")
        quick = fn.run(params={{"seconds": 0.1}})
        print("quick", quick.state(), quick.outputs)
        handle = fn.run(params={{"seconds": 30}}, watch=False)
        while handle.state() != "running":
            time.sleep(0.1)
        handle.abort()
        print("slow", handle.wait(timeout=30).state)
        try:
            handle.abort()
        except runplane.errors.RunplaneError as error:
            print("again", error.http_status)
    """)
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=client_env(service_url, tmp_path),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "quick completed {'slept': 0.1, 'return': {'slept': 0.1}}",
        "slow aborted",
        "again 409",
    ]


def test_wrong_token_is_a_clear_error(service_url, tmp_path):
    env = client_env(service_url, tmp_path) | {"RUNPLANE_TOKEN": "wrong"}
    done = runplane(env, "runs")
    assert done.returncode == 4  # refused: no permission without a valid token
    assert done.stderr == "error: a valid bearer token is required\n"


def test_schedules_from_the_cli_and_the_sdk(service_url, tmp_path):
    script = tmp_path / "nightly.py"
    script.write_text("def handler(context):\n    return 1\n")
    env = client_env(service_url, tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return runplane(env, *args)

    created = cli("schedule", "create", str(script), "--handler", "handler", "--cron", "0 3 * * *")
    assert created.returncode == 0, created.stderr
    schedule_id = created.stdout.split()[0]
    assert "default/nightly '0 3 * * *'" in created.stdout
    program = textwrap.dedent(f"""
        import runplane
        fn = runplane.code_to_function("hourly", filename={str(script)!r}, handler="handler")
        print(fn.run(schedule="0 * * * *")["cron"])
    """)
    sdk = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert sdk.stdout.strip() == "0 * * * *", sdk.stderr
    listed = cli("schedule", "list").stdout
    assert "nightly" in listed
    assert "hourly" in listed
    assert cli("schedule", "delete", schedule_id).returncode == 0
    assert "nightly" not in cli("schedule", "list").stdout
    bad = cli("schedule", "create", str(script), "--handler", "handler", "--cron", "often")
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: schedule: 'often' is not valid")
    listing = cli("get", "deployments")
    assert listing.returncode == 0, listing.stderr  # the service's: none yet


def test_a_deployment_through_the_service_from_the_sdk_and_the_cli(service_url, tmp_path):
    """fn.deploy() and fn.invoke() with RUNPLANE_API set, then runplane get/delete
    deployment(s): the service (on its local runtime) runs the replicas on its machine."""
    script = tmp_path / "echo.py"
    script.write_text(
        "def handler(context, event):\n"
        "    if event.path.endswith('/missing'):\n"
        "        return 404, {'error': 'no such thing'}\n"
        "    return {'path': event.path, 'x': event.body['x'] * 2}\n"
    )
    env = client_env(service_url, tmp_path)
    program = textwrap.dedent(f"""
        import runplane
        fn = runplane.code_to_function(
            "echo", filename={str(script)!r}, kind="serving", handler="handler"
        )
        fn.with_requests(cpu="100m", mem="64Mi")
        print(fn.deploy()["applied"][0])
        print(fn.invoke("/predict", body={{"x": 21}}))
        try:
            fn.invoke("/missing", body={{"x": 1}})
        except runplane.errors.RunplaneError as error:
            print(error)
    """)
    sdk = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120
    )
    assert sdk.returncode == 0, sdk.stderr
    applied, answer, missing = sdk.stdout.strip().splitlines()
    assert applied.startswith("Deployment/echo: 1 replica(s) at http://127.0.0.1:")
    assert answer == "{'path': '/predict', 'x': 42}"
    assert missing == 'the function answered 404: {"error": "no such thing"}'

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return runplane(env, *args)

    invoked = cli("invoke", "echo", "/predict", "--body", '{"x": 4}')
    assert invoked.returncode == 0, invoked.stderr
    assert json.loads(invoked.stdout) == {"path": "/predict", "x": 8}
    refused = cli("invoke", "echo", "/missing", "--body", '{"x": 4}')
    assert refused.returncode != 0
    assert 'the function answered 404: {"error": "no such thing"}' in refused.stderr
    listed = cli("get", "deployments", "--json")
    assert listed.returncode == 0, listed.stderr
    (echo,) = json.loads(listed.stdout)
    assert (echo["project"], echo["name"], echo["owner"], echo["state"]) == (
        "default",
        "echo",
        "bob",
        "ready",
    )
    deleted = cli("delete", "deployment", "echo")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == "default/echo deleted"
    assert json.loads(cli("get", "deployments", "--json").stdout) == []
    again = cli("delete", "deployment", "echo")
    assert again.returncode != 0
    assert "does not exist" in again.stderr


def test_schedules_need_the_service(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("def handler(context):\n    return 1\n")
    program = textwrap.dedent(f"""
        import runplane
        fn = runplane.code_to_function("job", filename={str(script)!r}, handler="handler")
        try:
            fn.run(schedule="* * * * *")
        except runplane.errors.RunplaneError as error:
            print(error)
    """)
    env = clean_env(RUNPLANE_LOCAL__HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith(
        "schedule: '* * * * *' is not valid; Unexpected schedule='* * * * *' parameter for local "
        "function execution: a schedule is kept by the runplane service (`runplane serve`)"
    ), done.stderr


def test_mlrun_code_against_the_service(service_url, tmp_path):
    """MLRun-style calls through RUNPLANE_API: a Python function as the handler, a
    hyperparameter search, stored functions and the run DB, and the secret-store refusal."""
    script = tmp_path / "mlrun_style.py"
    script.write_text(
        textwrap.dedent("""
        import runplane as mlrun

        def hyper_func(context, p1, p2):
            context.log_result("multiplier", p1 * p2)

        task = mlrun.new_task("grid").with_hyper_params(
            {"p1": [1, 3], "p2": [2]}, selector="max.multiplier"
        )
        run = mlrun.new_function(project="remote").run(task, handler=hyper_func, watch=False)
        print("best", run.outputs["multiplier"], run.outputs["best_iteration"])
        fn = mlrun.new_function("stored", project="remote", image="python:3.11")
        print("saved", fn.save())
        print("image", mlrun.import_function("db://remote/stored").spec.image)
        db = mlrun.get_run_db()
        print("projects", db.list_projects())
        print("runs", len(db.list_runs(project="remote")))
        print("functions", [f["metadata"]["name"] for f in db.list_functions(project="remote")])
        project = mlrun.new_project("remote", context=".")
        try:
            project.set_secrets({"KEY": "value"})
        except mlrun.errors.MLRunInvalidArgumentError as error:
            print("secrets", "kubectl create secret generic runplane-project-remote" in str(error))
        """)
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        env=client_env(service_url, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "best 6 2",
        "saved db://remote/stored",
        "image python:3.11",
        "projects ['remote']",
        "runs 3",
        "functions ['stored']",
        "secrets True",
    ]


def test_projects_are_recorded_in_the_service(service_url, tmp_path):
    """new_project and project.save() keep the project's record in the service; the run DB
    and a fresh context read it back; another context's get_or_create_project begins from it."""
    script = tmp_path / "projects.py"
    script.write_text(
        textwrap.dedent("""
        import runplane as mlrun

        project = mlrun.new_project(
            "churn", context="./one", description="churn models", parameters={"label": "y"}
        )
        project.set_default_image("python:3.11")
        project.save()
        db = mlrun.get_run_db()
        print("names", db.list_projects())
        stored = db.get_project("churn")
        print("stored", stored.spec.description, stored.spec.params, stored.default_image)
        print("owner", project.owner)
        again = mlrun.get_or_create_project("churn", context="./two")
        print("again", again.spec.description, again.spec.params)
        full = db.list_projects(format_="full", owner="bob")
        print("full", [(p.name, p.spec.description) for p in full])
        db.delete_project("churn")
        print("left", db.list_projects())
        """)
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        env=client_env(service_url, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "names ['churn']",
        "stored churn models {'label': 'y'} python:3.11",
        "owner bob",
        "again churn models {'label': 'y'}",
        "full [('churn', 'churn models')]",
        "left []",
    ]
    assert (tmp_path / "two" / "project.yaml").is_file()

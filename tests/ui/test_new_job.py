"""The New Job flow: a function, its Resources pane, Run now or Schedule for later."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from playwright.sync_api import Page, expect

from runplane.config import load_settings
from runplane.runtimes.kubernetes.api.calls import ClusterError
from runplane.service.api import create_app
from runplane.service.server import Server
from runplane.ui import mount
from testbed import serve

from .conftest import ADMIN_TOKEN, TOKENS, USER_TOKEN, code_function, login, shot

TRAIN = """\
import os


def train(context, epochs: int = 1, rate: float = 0.1):
    with open(os.path.join(context.volume_path("/data"), "input.txt")) as f:
        data = f.read().strip()
    print(f"training {epochs} epochs on {data}", flush=True)
    return {"accuracy": round(1 - rate, 2), "epochs": epochs, "data": data,
            "env": os.environ.get("MY_ENV", "")}
"""


@pytest.fixture
def train_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def open_new_job(page: Page, project: str) -> None:
    page.goto(f"/ui/projects/{project}/jobs/new")
    expect(page.get_by_role("heading", name="New Job")).to_be_visible()


def test_the_whole_new_job_flow_runs_with_exactly_those_settings(
    page: Page, train_file: Path, volume_dir: Path
) -> None:
    (volume_dir / "sub").mkdir()
    (volume_dir / "sub" / "input.txt").write_text("the-volume-data\n")
    login(page)
    open_new_job(page, "flow")
    page.get_by_label("Code file (.py)").set_input_files(str(train_file))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.get_by_label("epochs (int)").fill("3")
    page.get_by_label("Memory request").fill("64Mi")
    page.get_by_label("Memory limit").fill("256Mi")
    page.get_by_label("CPU request").fill("100m")
    page.get_by_label("CPU limit").fill("1")
    page.get_by_label("GPU limit").fill("0")
    node_selector = page.get_by_role("group", name="Node Selector")
    node_selector.get_by_role("button", name="+").click()
    node_selector.get_by_label("Key").fill("app.iguazio.com/lifecycle")
    node_selector.get_by_label("Value").fill("non-preemptible")
    page.get_by_label("Run on Spot nodes").select_option("prevent")
    page.get_by_label("Pods Priority").select_option("high")
    page.get_by_label("Volumes", exact=True).select_option("manual")
    volumes = page.get_by_role("group", name="Volumes list")
    volumes.get_by_role("button", name="+").click()
    volumes.get_by_label("Volume type").select_option("pvc")
    volumes.get_by_label("Volume name").fill("data")
    volumes.get_by_label("Claim, ConfigMap or Secret").fill("data-claim")
    volumes.get_by_label("Mount path").fill("/data")
    volumes.get_by_label("Sub path").fill("sub")
    env = page.get_by_role("group", name="Environment variables")
    env.get_by_role("button", name="+").click()
    env.get_by_label("Variable name").fill("MY_ENV")
    env.get_by_label("Variable value").fill("MY_VAL")
    page.get_by_label("running threshold").fill("10 minutes")
    page.get_by_label("Name", exact=True).click()  # leave the field: the check runs on change
    expect(page.locator("#placement")).to_contain_text("It can start now.")
    shot(page, "new-job", full_page=True)

    page.get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f]{32}$"))
    expect(page.locator("#run-state")).to_have_text("completed", timeout=60_000)
    results = page.locator("#results")
    expect(results).to_contain_text("the-volume-data")
    expect(results).to_contain_text("MY_VAL")
    expect(results).to_contain_text("0.9")
    expect(page.locator("#logs")).to_contain_text("training 3 epochs on the-volume-data")
    shot(page, "run", full_page=False)

    pod = next(yaml.safe_load_all(page.locator("#rendered-yaml").inner_text()))
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "256Mi"},
    }
    assert spec["nodeSelector"] == {"app.iguazio.com/lifecycle": "non-preemptible"}
    assert spec["priorityClassName"] == "high"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {
        "key": "app.iguazio.com/lifecycle",
        "operator": "NotIn",
        "values": ["preemptible"],
    } in terms["nodeSelectorTerms"][0]["matchExpressions"]  # prevent: never on spot nodes
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}} in spec["volumes"]
    assert {"name": "data", "mountPath": "/data", "subPath": "sub"} in container["volumeMounts"]
    assert {"name": "MY_ENV", "value": "MY_VAL"} in container["env"]
    assert not any(v["name"] == "auto-mount" for v in spec["volumes"])  # Manual: no auto-mount


def test_invalid_values_are_shown_at_the_field_in_the_words_of_the_form(
    page: Page, train_file: Path
) -> None:
    login(page)
    open_new_job(page, "checks")
    page.get_by_label("Code file (.py)").set_input_files(str(train_file))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.get_by_label("Memory request").fill("1g")
    page.get_by_label("epochs (int)").fill("three")
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("#err-mem_request")).to_have_text(
        "Memory request: '1g' is not a quantity; use 512Mi, 1G or 2Gi (Mi and Gi are binary "
        "units, M and G decimal)"
    )
    expect(page.get_by_label("Memory request")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Memory request")).to_have_value("1g")  # kept for correcting
    page.get_by_label("Memory request").fill("64Mi")
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("#err-param-epochs")).to_have_text(
        "Parameter epochs: 'three' is not valid; the handler expects int (example: 3)"
    )
    shot(page, "new-job-errors")


def test_a_run_that_cannot_fit_is_flagged_before_submission(
    page: Page, train_file: Path, api: httpx.Client
) -> None:
    login(page)
    open_new_job(page, "placement")
    page.get_by_label("Code file (.py)").set_input_files(str(train_file))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.get_by_label("Memory request").fill("64Gi")
    page.get_by_label("CPU request").click()
    expect(page.locator("#placement")).to_have_text(
        "Placement check: this run cannot start on any node: 0/1 nodes are available: "
        "1 Insufficient memory."
    )
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("#form-errors")).to_contain_text("This run cannot start on any node")
    assert api.get("/runs", params={"project": "placement"}).json() == []  # nothing submitted


FORBIDDEN = (
    "kubernetes: listing nodes in ml-runs: HTTP 403: nodes is forbidden: User "
    '"system:serviceaccount:runplane:runplane" cannot list resource "nodes" in API group "" '
    "at the cluster scope"
)


@pytest.fixture
def nodes_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A service the cluster does not let read its nodes, as the chart installs it without
    ``rbac.nodes.enabled`` (here in this process: its runtime's read of the nodes refused)."""
    for name in list(os.environ):
        if name.startswith("RUNPLANE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    monkeypatch.setenv("RUNPLANE_LOCAL__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNPLANE_LOCAL__RUN_USERS", "same")
    monkeypatch.setenv("RUNPLANE_SERVICE__TOKENS", TOKENS)
    server = Server(load_settings())

    def refused() -> list[Any]:
        raise ClusterError(FORBIDDEN, 403)

    monkeypatch.setattr(server.runs.runtime, "nodes", refused)
    app = create_app(server)
    port = serve.free_port()
    web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    mount(app, server, stopping=lambda: web.should_exit)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    while not web.started:
        assert thread.is_alive(), "the service did not start"
        time.sleep(0.05)
    yield url
    web.should_exit = True
    thread.join(timeout=30)
    server.close()


def test_a_run_is_submitted_with_placement_unchecked_where_nodes_may_not_be_read(
    page: Page, train_file: Path, nodes_refused: str
) -> None:
    page.goto(f"{nodes_refused}/ui/login")
    page.get_by_label("Token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".who")).to_be_visible()
    page.goto(f"{nodes_refused}/ui/projects/unplaced/jobs/new")
    page.get_by_label("Code file (.py)").set_input_files(str(train_file))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.get_by_label("Memory request").fill("64Mi")
    page.get_by_label("CPU request").click()
    placement = page.locator("#placement")
    expect(placement).to_contain_text(
        "Placement not checked: this service may not read the cluster's nodes (no rights to "
        "list them: an admin grants them with the chart's rbac.nodes.enabled)"
    )
    expect(placement).to_contain_text('cannot list resource "nodes"')
    expect(placement).to_have_class(re.compile(r"\bwarning\b"))
    expect(page.locator("#form-errors")).to_have_count(0)
    page.get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/ui/runs/[0-9a-f]{32}$"))


def test_a_forbidden_priority_class_is_refused_at_the_field(page: Page, train_file: Path) -> None:
    login(page, USER_TOKEN)  # bob, a user: "high" is for admins
    open_new_job(page, "bobs")
    page.get_by_label("Code file (.py)").set_input_files(str(train_file))
    expect(page.get_by_label("Handler")).to_have_value("train")
    priority = page.get_by_label("Pods Priority")
    offered = priority.locator("option").evaluate_all("options => options.map(o => o.value)")
    assert offered == ["", "low", "medium"]
    # A crafted (or stale) form asking for it anyway is refused by the policy, at the field.
    priority.evaluate("select => select.add(new Option('high', 'high', true, true))")
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("#err-priority")).to_have_text(
        "Pods Priority: role 'user' may not use priority class 'high' (allowed roles: admin)"
    )


def test_schedule_for_later_previews_fire_times_and_creates_a_schedule(
    page: Page, train_file: Path, api: httpx.Client
) -> None:
    login(page)
    open_new_job(page, "nightly")
    page.get_by_label("Code file (.py)").set_input_files(str(train_file))
    expect(page.get_by_label("Handler")).to_have_value("train")
    page.get_by_label("Memory request").fill("64Mi")
    page.get_by_label("Cron schedule").fill("0 3 31 2 *")
    expect(page.locator("#cron-preview")).to_contain_text("it must name a time that comes")
    page.get_by_label("Cron schedule").fill("0 3 * * *")
    expect(page.locator("#cron-preview li")).to_have_count(5)
    expect(page.locator("#cron-preview li").first).to_contain_text("03:00:00")
    page.get_by_role("button", name="Schedule for later").click()
    expect(page.get_by_role("status")).to_have_text("Schedule created.")
    (row,) = page.locator("table.schedules tbody tr").all()
    expect(row).to_contain_text("0 3 * * *")
    expect(row).to_contain_text("03:00:00")
    (schedule,) = [s for s in api.get("/schedules").json() if s["project"] == "nightly"]
    assert schedule["function"]["spec"]["resources"] == {"requests": {"memory": "64Mi"}}
    shot(page, "schedules")
    row.get_by_role("button", name=re.compile("Delete schedule")).click()
    expect(page.get_by_role("status")).to_contain_text("deleted")
    assert [s for s in api.get("/schedules").json() if s["project"] == "nightly"] == []


def test_rerun_is_prefilled_from_the_run(page: Page, api: httpx.Client) -> None:
    fn = code_function(
        "rerun-me",
        "reruns",
        "def main(context, n: int = 1, label: str = 'x'):\n    return {'n': n}\n",
        "main",
        resources={"requests": {"memory": "48Mi", "cpu": "150m"}, "limits": {"memory": "96Mi"}},
        node_selector={"app.iguazio.com/lifecycle": "non-preemptible"},
        priority_class_name="low",
        env=[{"name": "GREETING", "value": "hello"}],
    )
    created = api.post("/runs", json={"function": fn, "params": {"n": 7, "label": "first"}})
    uid = created.json()["uid"]
    login(page)
    page.goto(f"/ui/runs/{uid}")
    page.get_by_role("link", name="Rerun", exact=True).click()
    expect(page.get_by_label("Memory request")).to_have_value("48Mi")
    expect(page.get_by_label("CPU request")).to_have_value("150m")
    expect(page.get_by_label("Memory limit")).to_have_value("96Mi")
    expect(page.get_by_label("Pods Priority")).to_have_value("low")
    expect(page.get_by_label("Handler")).to_have_value("main")
    expect(page.get_by_label("n (int)")).to_have_value("7")
    expect(page.get_by_label("label (str)")).to_have_value("first")
    node_selector = page.get_by_role("group", name="Node Selector")
    expect(node_selector.get_by_label("Key")).to_have_value("app.iguazio.com/lifecycle")
    expect(node_selector.get_by_label("Value")).to_have_value("non-preemptible")
    expect(page.get_by_label("Variable name")).to_have_value("GREETING")
    page.get_by_role("button", name="Run now").click()
    expect(page.locator("#run-state")).to_have_text("completed", timeout=60_000)
    expect(page.locator("#results")).to_contain_text("7")


def test_a_secret_the_users_token_does_not_grant_is_refused(page: Page, train_file: Path) -> None:
    """The pages submit through the same checks as the API: a user's run may reference only
    the Secrets their token grants."""
    login(page, USER_TOKEN)  # bob, a user: no Secret granted
    open_new_job(page, "bobs")
    page.get_by_label("Code file (.py)").set_input_files(str(train_file))
    expect(page.get_by_label("Handler")).to_have_value("train")
    env = page.get_by_role("group", name="Environment variables")
    env.get_by_role("button", name="+").click()
    env.get_by_label("Variable name").fill("PASSWORD")
    env.get_by_label("or from Secret").fill("db-credentials")
    env.get_by_label("Secret key").fill("password")
    page.get_by_label("Run anyway").check()
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_text("Secret 'db-credentials' is not granted to user 'bob'")).to_be_visible()

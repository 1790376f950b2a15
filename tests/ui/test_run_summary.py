"""A run's page answers "what did this run get" in words at the top, and its YAML is the pod's
settings, the bootstrap's files and the code set apart behind references."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Page, expect

from .conftest import code_function, login

CODE = "import os\n\ndef show(context):\n    return {'env': os.environ.get('MY_ENV', '')}\n"


def test_the_run_page_says_what_the_run_got(page: Page, api: httpx.Client) -> None:
    fn = code_function(
        "summarised",
        "summary",
        CODE,
        "show",
        resources={"requests": {"memory": "64Mi", "cpu": "100m"}, "limits": {"memory": "256Mi"}},
        node_selector={"app.iguazio.com/lifecycle": "non-preemptible"},
        preemption_mode="prevent",
        priority_class_name="low",
        env=[{"name": "MY_ENV", "value": "hello"}],
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}}],
        volume_mounts=[{"name": "data", "mountPath": "/data"}],
        disable_auto_mount=True,
    )
    created = api.post("/runs", json={"function": fn})
    assert created.status_code == 201, created.text
    uid = created.json()["uid"]
    deadline = time.monotonic() + 60
    while api.get(f"/runs/{uid}").json()["state"] not in ("completed", "error"):
        assert time.monotonic() < deadline, "the run did not finish"
        time.sleep(0.1)
    login(page)
    page.goto(f"/ui/runs/{uid}")
    got = page.get_by_role("region", name="What this run got")

    def row(name: str) -> object:
        return got.get_by_role("row", name=re.compile(f"^{name}"))

    expect(row("Node selector")).to_contain_text("app.iguazio.com/lifecycle=non-preemptible")
    expect(row("Run on Spot nodes")).to_contain_text("prevent")
    expect(row("Priority class")).to_contain_text("low")
    expect(row("Requests")).to_contain_text("memory 64Mi")
    expect(row("Limits")).to_contain_text("memory 256Mi")
    expect(row("QoS class")).to_contain_text("Burstable")
    expect(row("Volumes")).to_contain_text("PVC data-claim at /data")
    expect(row("Environment")).to_contain_text("MY_ENV=hello")
    expect(row("Attempts")).to_contain_text("ended Completed (exit code 0)")

    yaml_text = page.locator("#rendered-yaml").inner_text()
    assert "<set apart [1]:" in yaml_text
    assert "def handle" not in yaml_text  # the bootstrap's program is set apart
    assert len(yaml_text) < 12_000, len(yaml_text)
    first = page.locator("details.apart").first
    first.locator("summary").click()
    expect(first.locator("pre")).to_be_visible()

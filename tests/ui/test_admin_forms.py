"""Admins label the node on the Cluster page and edit the policies on Common Parameters; users
read both, and their attempts are refused with the API's 403 message. What changed applies to
the next run: a run selecting the new label starts, a class no longer allowed is refused at the
New Job field."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from .conftest import USER_TOKEN, code_function, login, shot

POOL = "runplane.io/pool"
CODE = "def train(context):\n    return {'placed': True}\n"


def node_name(api: httpx.Client) -> str:
    (node,) = api.get("/cluster").json()["nodes"]
    return str(node["name"])


def wait_finished(api: httpx.Client, uid: str, timeout: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = api.get(f"/runs/{uid}").json()
        if run["state"] in ("completed", "error", "aborted"):
            return dict(run)
        time.sleep(0.1)
    raise AssertionError(f"run {uid} did not finish")


def test_admins_label_the_node_and_a_run_selecting_it_starts(page: Page, api: httpx.Client) -> None:
    name = node_name(api)
    fn = code_function("placed", "labels", CODE, "train", node_selector={POOL: "ui"})
    login(page)
    page.goto("/ui/cluster")
    try:
        page.get_by_label("Label key").fill("kubernetes.io/hostname")
        page.get_by_label("Label value").fill("elsewhere")
        page.get_by_role("button", name="Set label").click()
        expect(page.get_by_role("alert")).to_contain_text(
            "labels under kubernetes.io/ and k8s.io/ are set by Kubernetes itself"
        )
        expect(page.get_by_label("Label key")).to_have_value("kubernetes.io/hostname")

        page.get_by_label("Label key").fill(POOL)
        page.get_by_label("Label value").fill("ui")
        page.get_by_role("button", name="Set label").click()
        expect(page.get_by_role("status")).to_have_text(f"Labels of {name} saved.")
        expect(page.get_by_text(f"{POOL}=ui")).to_be_visible()
        shot(page, "cluster-labels", full_page=True)
        assert api.get("/cluster").json()["nodes"][0]["labels"][POOL] == "ui"

        # Placement sees the label at once: a run selecting it starts and completes.
        uid = api.post("/runs", json={"function": fn}).json()["uid"]
        assert wait_finished(api, uid)["state"] == "completed"

        page.get_by_role("button", name=f"Remove label {POOL}").click()
        expect(page.get_by_role("status")).to_have_text(f"Labels of {name} saved.")
        expect(page.get_by_text(f"{POOL}=ui")).to_have_count(0)
        # Without the label the same run waits, saying why.
        uid = api.post("/runs", json={"function": fn}).json()["uid"]
        expect(page.get_by_role("button", name="Set label")).to_be_visible()
        run = api.get(f"/runs/{uid}").json()
        deadline = time.monotonic() + 30
        while "never start" not in run["status_text"] and time.monotonic() < deadline:
            time.sleep(0.1)
            run = api.get(f"/runs/{uid}").json()
        assert run["state"] == "pending"
        assert "didn't match Pod's node affinity/selector" in run["status_text"]
        api.post(f"/runs/{uid}/abort")
    finally:
        api.patch(f"/cluster/nodes/{name}", json={"labels": {POOL: None}})


def test_users_see_node_labels_read_only_and_are_refused(page: Page, api: httpx.Client) -> None:
    name = node_name(api)
    login(page, USER_TOKEN)
    page.goto("/ui/cluster")
    expect(page.locator("#labels-readonly")).to_have_text("Read-only: only admins label nodes.")
    expect(page.get_by_role("button", name="Set label")).to_have_count(0)
    expect(page.get_by_text("app.iguazio.com/lifecycle=non-preemptible")).to_be_visible()
    # Sent anyway, with the session's own CSRF token: the service's 403 and its words.
    csrf = page.evaluate("document.body.dataset.csrf")
    answer = page.request.post(
        f"/ui/cluster/nodes/{name}/labels", form={"csrf": csrf, "key": POOL, "value": "mine"}
    )
    assert answer.status == 403
    assert "user &#39;bob&#39; may not label nodes; only admins may" in answer.text()
    assert POOL not in api.get("/cluster").json()["nodes"][0]["labels"]


def test_admins_edit_policies_and_new_job_refuses_a_class_no_longer_allowed(
    page: Page, api: httpx.Client, tmp_path: Path
) -> None:
    before = api.get("/defaults").json()
    login(page)
    page.goto("/ui/settings")
    try:
        page.get_by_label("Allow low").uncheck()
        page.get_by_role("button", name="+", exact=True).click()
        page.locator("#group-rows .row").last.get_by_label("Group name").fill("gpu")
        page.locator("#group-rows .row").last.get_by_label("Group node labels").fill(f"{POOL}=gpu")
        page.locator("#group-rows .row").last.get_by_label("Why reserved").fill("kept for serving")
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("status")).to_have_text("Saved.")
        expect(page.get_by_label("Allow low")).not_to_be_checked()
        shot(page, "common-parameters-policies", full_page=True)
        policies = api.get("/defaults").json()["policies"]
        assert policies["allowed_priority_classes"] == ["medium", "high"]
        assert policies["reserved_node_groups"][-1] == {
            "name": "gpu",
            "node_selector": {POOL: "gpu"},
            "reason": "kept for serving",
        }
        assert api.get("/defaults").json()["resources"] == before["resources"]  # untouched

        # A policy the defaults cannot live with is refused whole, with its words.
        page.get_by_label("Allow medium").uncheck()
        page.get_by_role("button", name="Save").click()
        expect(page.get_by_role("alert")).to_contain_text(
            "the default priority class 'medium' must stay allowed"
        )
        assert api.get("/defaults").json()["policies"] == policies

        # The user's New Job: "low" is no longer offered, and refused at the field if sent.
        page.context.clear_cookies()
        login(page, USER_TOKEN)
        page.goto("/ui/settings")
        expect(page.get_by_label("Allow low")).to_be_disabled()
        expect(page.get_by_label("Who may use high")).to_be_disabled()
        page.goto("/ui/projects/bobs/jobs/new")
        train = tmp_path / "train.py"
        train.write_text(CODE)
        page.get_by_label("Code file (.py)").set_input_files(str(train))
        expect(page.get_by_label("Handler")).to_have_value("train")
        priority = page.get_by_label("Pods Priority")
        offered = priority.locator("option").evaluate_all("options => options.map(o => o.value)")
        assert offered == ["", "medium"]
        priority.evaluate("select => select.add(new Option('low', 'low', true, true))")
        page.get_by_role("button", name="Run now").click()
        expect(page.locator("#err-priority")).to_contain_text(
            "valid priority classes are medium, high"
        )
        # And a node selector on the group just reserved is refused by the policy.
        priority.select_option("")
        node_selector = page.get_by_role("group", name="Node Selector")
        node_selector.get_by_role("button", name="+").click()
        node_selector.get_by_label("Key").fill(POOL)
        node_selector.get_by_label("Value").fill("gpu")
        page.get_by_role("button", name="Run now").click()
        expect(page.locator("#err-node_selector")).to_contain_text(
            "node group 'gpu', which is kept for serving"
        )
    finally:
        api.patch("/defaults", json={"policies": None})
    assert api.get("/defaults").json() == before


def test_a_users_policy_change_is_refused_with_the_403_message(
    page: Page, api: httpx.Client
) -> None:
    before = api.get("/defaults").json()
    login(page, USER_TOKEN)
    page.goto("/ui/settings")
    page.evaluate(
        "document.querySelectorAll('#defaults-form [disabled], #defaults-form [readonly]')"
        ".forEach(e => { e.disabled = false; e.readOnly = false; })"
    )
    page.get_by_label("Allow low").uncheck()
    with page.expect_response(re.compile("/ui/settings$")) as answer:
        page.get_by_role("button", name="Save").click()
    assert answer.value.status == 403
    expect(page.get_by_role("alert")).to_have_text(
        "user 'bob' may not change service defaults; only admins may"
    )
    expect(page.get_by_label("Allow low")).not_to_be_checked()  # the form as sent, refused
    assert api.get("/defaults").json() == before

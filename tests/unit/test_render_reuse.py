"""A job's rendering kept for many runs: each run's copy is what rendering it anew makes, and
shares nothing with the kept one or with another run's."""

from __future__ import annotations

import orjson
import pytest

import runplane
from runplane.config import load_settings
from runplane.errors import PolicyError
from runplane.rendering import RunRef, render
from runplane.rendering.reuse import JobRenders
from runplane.runtimes.request import build_request


def text_of(fn: runplane.Function, user: str = "ana") -> tuple[str, bytes]:
    return user, orjson.dumps(fn.to_dict())


def functions() -> list[runplane.Function]:
    plain = runplane.new_function("plain", project="fraud").with_requests(cpu=1, mem="1Gi")
    spot = runplane.new_function("spot").with_limits(cpu=2, mem="2Gi", gpus=1)
    spot.with_preemption_mode("prevent").with_node_selection(node_selector={"zone": "a"})
    spot.with_priority_class("high")
    secret = runplane.new_function("secret").with_requests(cpu="250m")
    secret.set_env_from_secret("TOKEN", "api", "token")
    secret.spec.env.append({"name": "MODE", "value": "fast"})
    secret.spec.annotations = {"team": "ml"}
    secret.spec.state_thresholds = {"pending_scheduled": "1h"}
    labelled = runplane.new_function("labelled", project="p").with_limits(mem="64Mi")
    labelled.metadata.labels = {"owner": "ana"}
    labelled.spec.tolerations = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return [plain, spot, secret, labelled]


@pytest.mark.parametrize("fn", functions(), ids=lambda fn: fn.metadata.name)
def test_each_runs_copy_is_what_rendering_it_anew_makes(fn):
    settings = load_settings()
    renders = JobRenders()
    text = text_of(fn)
    for uid, attempt in [("a" * 32, 1), ("b" * 32, 1), ("a" * 32, 2)]:
        run = RunRef(uid, attempt)
        assert renders.render(fn, settings, run, None, text) == render(fn, settings, run)


def test_a_runs_copy_shares_nothing_with_the_kept_rendering_nor_another_runs():
    fn, settings, renders = functions()[2], load_settings(), JobRenders()
    first = renders.render(fn, settings, RunRef("a" * 32), None, text_of(fn))
    pod, *_ = first.manifests
    pod["spec"]["containers"][0]["env"].append({"name": "MINE", "value": "1"})
    pod["spec"]["volumes"].clear()
    for manifest in first.manifests:
        manifest["metadata"]["labels"]["changed"] = "yes"
        manifest.get("data", {}).clear()
    first.lints.clear()
    second = renders.render(fn, settings, RunRef("b" * 32), None, text_of(fn))
    assert second == render(fn, settings, RunRef("b" * 32))
    assert second.lints == render(fn, settings).lints


def test_another_settings_object_or_role_renders_anew():
    fn = runplane.new_function("training").with_priority_class("high")
    renders, run = JobRenders(), RunRef("c" * 32)
    policy = load_settings(priority_classes={"allowed_roles": {"high": ["admin"]}})
    assert renders.render(fn, policy, run, "admin", text_of(fn)).pod_spec["priorityClassName"] == (
        "high"
    )
    with pytest.raises(PolicyError):  # the role is part of what names the rendering
        renders.render(fn, policy, run, "user", text_of(fn))
    changed = load_settings(function_defaults={"node_selector": {"pool": "batch"}})
    assert renders.render(fn, changed, run, "admin", text_of(fn)).pod_spec["nodeSelector"] == {
        "pool": "batch"
    }


def test_each_user_has_renderings_of_their_own():
    settings, renders, run = load_settings(), JobRenders(), RunRef("h" * 32)
    fn = runplane.new_function("training").with_requests(cpu=1)
    renders.render(fn, settings, run, None, text_of(fn, "ana"))
    renders.render(fn, settings, run, None, text_of(fn, "ana"))
    assert renders.kept() == 1
    renders.render(fn, settings, run, None, text_of(fn, "bo"))  # not ana's, though the same
    assert renders.kept() == 2


def test_the_functions_json_names_its_rendering_not_the_object():
    settings, renders, run = load_settings(), JobRenders(), RunRef("d" * 32)
    fn = runplane.new_function("training").with_requests(cpu=1)
    renders.render(fn, settings, run, None, text_of(fn))
    fn.with_requests(cpu=3)  # an SDK caller's function changes between runs: so does its JSON
    again = renders.render(fn, settings, run, None, text_of(fn))
    assert again.pod_spec["containers"][0]["resources"]["requests"]["cpu"] == "3"
    fn.with_requests(cpu=4)  # given without its JSON, it is rendered anew
    assert renders.render(fn, settings, run, None, None) == render(fn, settings, run)


def test_only_jobs_are_kept_and_at_most_the_bound():
    settings, run = load_settings(), RunRef("e" * 32)
    serving = runplane.new_function("model", kind="serving")
    renders = JobRenders(kept=2)
    assert renders.render(serving, settings, run, None, text_of(serving)) == render(
        serving, settings, run
    )
    assert renders.kept() == 0
    for fn in functions():
        renders.render(fn, settings, run, None, text_of(fn))
    assert renders.kept() == 2


def test_a_submitted_runs_request_is_built_from_the_kept_rendering():
    fn = runplane.new_function("training").with_requests(cpu=1, mem="1Gi")
    fn.with_code(body="def handler(x):\n    return x\n")
    fn.spec.handler = "handler"
    settings, renders = load_settings(), JobRenders()
    kept = [
        build_request(
            fn, settings, uid=uid * 32, params={"x": 1}, renders=renders, kept_as=text_of(fn)
        )
        for uid in "fg"
    ]
    fresh = build_request(fn, settings, uid="g" * 32, params={"x": 1})
    assert kept[1].manifests == fresh.manifests
    assert kept[1].resources == fresh.resources
    assert kept[0].pod["metadata"]["name"] != kept[1].pod["metadata"]["name"]

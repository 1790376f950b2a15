"""The web UI's parts that need no browser: the run feed, sessions, the form model, formats."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from typing import Any

import pytest

import runplane
from runplane.service.auth import Principal
from runplane.service.feed import RunFeed
from runplane.ui import present, sessions
from runplane.ui.jobform import EnvRow, JobForm, VolumeRow
from runplane.ui.web import safe_next


def run(main: Any) -> Any:
    """``asyncio.run(main())`` on a thread of its own: a browser test in the same session
    leaves Playwright's loop running on the main thread."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(asyncio.run(main())))
    worker.start()
    worker.join(30)
    return result[0]


HTMX_SHA256 = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"


def test_the_vendored_htmx_is_the_recorded_one():
    static = Path(runplane.__file__).parent / "ui" / "static"
    assert hashlib.sha256((static / "htmx.min.js").read_bytes()).hexdigest() == HTMX_SHA256
    assert "Zero-Clause BSD" in (static / "htmx.LICENSE").read_text()


def test_the_feed_delivers_uids_published_from_other_threads():
    feed = RunFeed()

    async def main() -> set[str | None]:
        async with feed.subscribe() as changes:
            assert feed.subscribers == 1
            threading.Thread(target=feed.publish, args=(["a", "b"],)).start()
            first = await changes.changed(5)
            feed.publish(["c"])
            feed.publish(["c", "d"])
            await asyncio.sleep(0)
            return first | await changes.changed(5)

    assert run(main) == {"a", "b", "c", "d"}
    assert feed.subscribers == 0
    feed.publish(["nobody listens"])  # costs nothing, raises nothing


def test_a_slow_subscriber_is_told_to_reload_rather_than_kept_growing():
    feed = RunFeed()

    async def main() -> set[str | None]:
        async with feed.subscribe() as changes:
            for n in range(50):
                feed.publish([f"{n}-{i}" for i in range(100)])
            await asyncio.sleep(0.05)
            return await changes.changed(1)

    assert run(main) == {None}


def test_a_quiet_feed_returns_nothing_after_the_timeout():
    async def main() -> set[str | None]:
        async with RunFeed().subscribe() as changes:
            return await changes.changed(0.01)

    assert run(main) == set()


def test_sessions_end_at_logout_and_when_idle(monkeypatch):
    store = sessions.Sessions()
    session = store.login(Principal("alice", "admin"))
    assert store.get(session.id) is session
    assert store.get("forged") is None
    assert store.get(None) is None
    store.logout(session.id)
    assert store.get(session.id) is None
    idle = store.login(Principal("bob", "user"))
    monkeypatch.setattr(sessions.time, "monotonic", lambda: idle.last_seen + 25 * 3600)
    assert store.get(idle.id) is None


def test_sessions_are_bounded_per_user_and_the_least_recently_used_goes():
    store = sessions.Sessions(per_user=3)
    admin = store.login(Principal("alice", "admin"))
    made = [store.login(Principal("bob", "user")) for _ in range(3)]
    assert store.get(made[0].id) is made[0]  # used: now bob's most recent
    made += [store.login(Principal("bob", "user")) for _ in range(2)]
    assert [store.get(s.id) is not None for s in made] == [True, False, False, True, True]
    assert store.get(admin.id) is admin
    assert len(store) == 4
    store.logout(admin.id)
    assert len(store) == 3


@pytest.mark.parametrize(
    ("target", "where"),
    [
        ("/ui/runs/abc", "/ui/runs/abc"),
        ("/ui/projects/p/jobs?page=2", "/ui/projects/p/jobs?page=2"),
        ("//evil.example/ui/", "/ui/"),
        ("https://evil.example/ui/", "/ui/"),
        ("/ui/../\\evil.example", "/ui/"),
        ("/ui//evil.example", "/ui/"),
        ("", "/ui/"),
        (None, "/ui/"),
    ],
)
def test_after_login_only_pages_of_the_ui_are_followed(target, where):
    assert safe_next(target) == where


def _function(tmp_path: Path) -> runplane.Function:
    code = tmp_path / "train.py"
    code.write_text("def train(context, epochs: int = 1):\n    return epochs\n")
    return runplane.code_to_function("train", filename=str(code), handler="train")


def test_the_form_applies_each_field_with_the_sdk_call(tmp_path):
    form = JobForm(
        mem_request="64Mi",
        mem_limit="1Gi",
        cpu_request="250m",
        gpu_limit="1",
        node_selector=[("app.iguazio.com/lifecycle", "non-preemptible")],
        preemption_mode="constrain",
        priority="high",
        volumes_mode="manual",
        volumes=[
            VolumeRow("pvc", "data", "data-claim", "/data", "users/alice"),
            VolumeRow("configmap", "config", "app-config", "/etc/app", ""),
            VolumeRow("v3io", "v3io", "v3io-access", "/v3io", "projects/p"),
        ],
        env=[EnvRow("A", "1"), EnvRow("PASSWORD", "", "db-credentials", "password")],
        thresholds={"running": "10 minutes", "pending_scheduled": ""},
    )
    fn, errors = form.apply(_function(tmp_path))
    assert errors == {}
    expected = (
        _function(tmp_path)
        .with_requests(mem="64Mi", cpu="250m")
        .with_limits(mem="1Gi", gpus=1)
        .with_node_selection(node_selector={"app.iguazio.com/lifecycle": "non-preemptible"})
        .with_preemption_mode("constrain")
        .with_priority_class("high")
        .set_env("A", "1")
        .set_env_from_secret("PASSWORD", "db-credentials", "password")
        .set_state_thresholds({"running": "10 minutes"})
    )
    expected.spec.disable_auto_mount = True
    assert fn.spec.resources == expected.spec.resources
    assert fn.spec.node_selector == expected.spec.node_selector
    assert fn.spec.preemption_mode == expected.spec.preemption_mode
    assert fn.spec.priority_class_name == "high"
    assert fn.spec.env == expected.spec.env
    assert fn.spec.state_thresholds == {"running": "10 minutes"}
    assert fn.spec.disable_auto_mount is True
    assert fn.spec.volume_mounts == [
        {"name": "data", "mountPath": "/data", "subPath": "users/alice"},
        {"name": "config", "mountPath": "/etc/app"},
        {"name": "v3io", "mountPath": "/v3io", "subPath": "projects/p"},
    ]
    assert fn.spec.volumes[0] == {
        "name": "data",
        "persistentVolumeClaim": {"claimName": "data-claim"},
    }
    # Shown again, the form is the same: what was applied round-trips.
    again = JobForm.of(fn)
    assert (again.mem_request, again.mem_limit, again.gpu_limit) == ("64Mi", "1Gi", "1")
    assert again.volumes == form.volumes
    assert again.env == form.env
    assert again.volumes_mode == "manual"


def test_refused_fields_are_worded_for_the_form_and_leave_the_rest(tmp_path):
    form = JobForm(
        cpu_request="lots",
        mem_request="2Gi",
        mem_limit="1Gi",
        node_selector=[("k", "a"), ("k", "b")],
        volumes_mode="manual",
        volumes=[VolumeRow("pvc", "data", "data-claim", "relative/path", "")],
        env=[EnvRow("", "x")],
        thresholds={"running": "soon"},
    )
    fn, errors = form.apply(_function(tmp_path))
    assert errors["cpu_request"] == (
        "CPU request: 'lots' is not a quantity; use cores, as 500m, 1 or 2.5"
    )
    assert errors["mem_limit"] == (
        "Memory limit: '1Gi' is below the Memory request '2Gi'; a request must be at most its "
        "limit: raise the limit or lower the request"
    )
    assert errors["node_selector"] == (
        "node selector keys must be unique; 'k' appears more than once"
    )
    assert errors["vol-0"].startswith("Volume row 1, Mount path: 'relative/path' is not valid")
    assert errors["env-0"].startswith("Variable row 1")
    assert errors["threshold.running"] == (
        "running threshold: 'soon' is not a duration; use 1h, 30 minutes, 1 minute and 30s, or "
        "-1 for never"
    )
    assert not [e for e in errors.values() if "with_" in e or "9223372036854775807" in e]
    assert fn.spec.resources.requests == {"memory": "2Gi"}


def test_modes_auto_and_none_and_defaults_clear_what_the_function_had(tmp_path):
    base = _function(tmp_path).apply(runplane.mount_pvc("claim", "data", "/data"))
    base.with_priority_class("low").with_preemption_mode("allow")
    fn, errors = JobForm(volumes_mode="none").apply(base)
    assert errors == {}
    assert (fn.spec.volumes, fn.spec.disable_auto_mount) == ([], True)
    assert (fn.spec.priority_class_name, fn.spec.preemption_mode) == (None, None)
    fn, _ = JobForm(volumes_mode="auto").apply(base)
    assert (fn.spec.volumes, fn.spec.disable_auto_mount) == ([], False)
    assert JobForm.of(base).volumes_mode == "manual"


def test_formats():
    assert present.duration(4.25) == "4.2s"
    assert present.duration(75) == "1m 15s"
    assert present.duration(3 * 3600 + 120) == "3h 02m"
    assert present.size(512 << 20) == "512Mi"
    assert present.size(1536 << 20) == "1.5Gi"
    assert present.resource("cpu", 1500) == "1500m"
    assert present.resource("cpu", 2000) == "2"
    assert present.resources({"cpu": "100m"}, {"memory": "1Gi", "nvidia.com/gpu": 1}) == (
        "cpu 100m/- · memory -/1Gi · nvidia.com/gpu 1"
    )

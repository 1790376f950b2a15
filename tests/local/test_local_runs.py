"""The embedded default with real processes: results, limits, capacity, priority, thresholds."""

from __future__ import annotations

import time

import pytest

from runplane.errors import InvalidValueError, NotFoundError, RunFinishedError
from runplane.spec.run_options import RunOptions

SLEEP = """
import time

def handler(context, seconds: float = 1.0):
    start = time.time()
    time.sleep(seconds)
    return {"start": start, "end": time.time()}
"""


#: Tests that run under a cgroup and under the watchdog fallback, which must pass them too.
BOTH = pytest.mark.parametrize("isolation", ["cgroup", "watchdog"], indirect=True)


def wait_for(predicate, timeout=15.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


@BOTH
def test_results_artifacts_and_usage(isolation, service, make_function, tmp_path):
    source = tmp_path / "model.bin"
    source.write_bytes(b"\x00" * 1000)
    fn = make_function(f"""
        def handler(context, epochs: int, rate: float = 0.5, tags: list = None):
            context.logger.info("training %d epochs", epochs)
            context.log_result("accuracy", 0.93)
            context.log_artifact("model", local_path={str(source)!r})
            context.log_artifact("report", body="all good")
            return {{"epochs": epochs, "rate": rate, "tags": tags, "type": type(epochs).__name__}}
    """)
    fn.with_requests(cpu="500m", mem="64Mi")
    uid = service.submit(fn, RunOptions(params={"epochs": "3", "tags": '["a", "b"]'})).uid
    record = service.wait(uid, timeout=30)
    assert record.state == "completed", record.status_text
    returned = {"epochs": 3, "rate": 0.5, "tags": ["a", "b"], "type": "int"}
    assert record.results == {"accuracy": 0.93, **returned, "return": returned}
    assert [(a["key"], a["size"]) for a in record.artifacts] == [("model", 1000), ("report", 8)]
    assert [t.state for t in record.transitions] == ["created", "pending", "running", "completed"]
    times = [t.at for t in record.transitions]
    assert times == sorted(times)
    (attempt,) = record.attempts
    assert attempt.exit_code == 0
    assert attempt.process_id
    assert attempt.node
    # A fresh interpreter holds several MiB; a warm run (forked, in a cgroup) is charged them
    # too, though the server's pages it shares are the server's (runtimes/local/footprint.py).
    assert record.peak_memory_bytes > 5 * 2**20
    assert record.cpu_seconds > 0
    assert record.requests == {"cpu": "500m", "memory": "64Mi"}
    log = service.logs(uid)[0].decode()
    assert "training 3 epochs" in log


def test_handler_exception_is_an_error_with_its_message(service, make_function):
    fn = make_function("""
        def handler(context):
            raise ValueError("bad data in row 7")
    """)
    record = service.wait(service.submit(fn).uid, timeout=30)
    assert record.state == "error"
    assert record.reason == "Error"
    assert record.status_text == "ValueError: bad data in row 7"
    assert record.attempts[0].exit_code == 1


def test_a_run_s_context_has_its_labels_and_kind_local(service, make_function):
    """As MLRun's local run: the function's and the call's labels, ``kind`` where it ran."""
    fn = make_function("""
        def handler(context):
            return dict(context.labels)
    """).set_labels({"team": "vision"})
    record = service.wait(service.submit(fn).uid, timeout=30)
    assert record.state == "completed", record.status_text
    assert record.results["return"] == {"team": "vision", "kind": "local"}


@BOTH
def test_memory_limit_kills_and_records_oomkilled(isolation, service, make_function):
    fn = make_function("""
        import time

        def handler(context):
            context.log_result("before", True)
            hog = []
            for _ in range(60):
                hog.append(bytearray(10 * 2**20))
                time.sleep(0.02)
            return {"survived": True}
    """)
    fn.with_requests(mem="100Mi").with_limits(mem="200Mi")
    record = service.wait(service.submit(fn).uid, timeout=60)
    assert record.state == "error"
    assert record.reason == "OOMKilled"
    assert record.attempts[0].exit_code == 137
    assert record.attempts[0].reason == "OOMKilled"
    assert record.results == {"before": True}  # what was logged before the kill is kept
    if isolation == "cgroup":  # the kernel stops it at the limit
        assert record.status_text.startswith(
            "the run reached its memory limit 200Mi and the kernel killed it (peak "
        )
        assert 150 * 2**20 < record.peak_memory_bytes <= 200 * 2**20
    else:  # the watchdog sees it past the limit
        assert "exceeded the limit 200Mi" in record.status_text
        assert record.peak_memory_bytes > 200 * 2**20
    assert record.isolation.startswith("cgroup v" if isolation == "cgroup" else "watchdog, ")


@BOTH
def test_cpu_limit_confines_to_one_core(isolation, service, make_function):
    fn = make_function("""
        import multiprocessing, time

        def spin(seconds):
            end = time.time() + seconds
            while time.time() < end:
                pass

        def handler(context):
            start = time.time()
            workers = [multiprocessing.Process(target=spin, args=(1.5,)) for _ in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            return {"wall": time.time() - start}
    """)
    fn.with_limits(cpu=1)
    record = service.wait(service.submit(fn).uid, timeout=60)
    assert record.state == "completed", record.status_text
    # Two busy processes, one core: CPU time cannot exceed the wall time it was counted over
    # (the run's process from its start: its bootstrap's CPU too) by more than noise; two cores
    # would give about twice the spinners' wall.
    attempt = record.attempts[-1]
    assert attempt.started_at is not None
    assert attempt.ended_at is not None
    counted_over = attempt.ended_at - attempt.started_at
    assert record.results["wall"] <= counted_over
    assert record.cpu_seconds <= counted_over * 1.15, (record.cpu_seconds, counted_over)
    # ... and they did run (how fast depends on what else shares this machine's cores).
    assert record.cpu_seconds >= 0.1


def test_runs_that_do_not_fit_together_run_one_after_the_other(service, make_function):
    fn = make_function(SLEEP).with_requests(cpu="1500m", mem="64Mi")
    first = service.submit(fn, RunOptions(params={"seconds": 1})).uid
    second = service.submit(fn, RunOptions(params={"seconds": 1})).uid
    a, b = (service.wait(uid, timeout=30) for uid in (first, second))
    assert a.state == b.state == "completed"
    assert a.results["end"] <= b.results["start"] or b.results["end"] <= a.results["start"]
    waiting = [t.message for t in b.transitions if t.state == "pending"]
    assert waiting


def test_small_runs_run_together(service, make_function):
    fn = make_function(SLEEP).with_requests(cpu="500m", mem="64Mi")
    first = service.submit(fn, RunOptions(params={"seconds": 1})).uid
    second = service.submit(fn, RunOptions(params={"seconds": 1})).uid
    a, b = (service.wait(uid, timeout=30) for uid in (first, second))
    assert a.results["start"] < b.results["end"]
    assert b.results["start"] < a.results["end"]


def test_high_priority_queued_later_starts_first(service, make_function):
    blocker = make_function(SLEEP, name="blocker").with_requests(cpu=2)
    hold = service.submit(blocker, RunOptions(params={"seconds": 1.5})).uid
    wait_for(lambda: service.store.get(hold).state == "running")
    work = make_function(SLEEP, name="work").with_requests(cpu=2)
    low = service.submit(work.with_priority_class("low"), RunOptions(params={"seconds": 0.2})).uid
    wait_for(lambda: service.store.get(low).reason == "Unschedulable")  # queued behind "hold"
    high = service.submit(work.with_priority_class("high"), RunOptions(params={"seconds": 0.2})).uid
    records = {uid: service.wait(uid, timeout=30) for uid in (hold, low, high)}
    assert all(r.state == "completed" for r in records.values())
    assert records[high].started_at < records[low].started_at
    assert records[low].created_at < records[high].created_at
    assert records[low].priority_class == "low"
    assert records[high].priority_class == "high"


def test_constrain_mode_pends_with_the_scheduler_reason(service, make_function):
    fn = make_function(SLEEP).with_preemption_mode("constrain")
    uid = service.submit(fn).uid
    record = wait_for(lambda: (r := service.store.get(uid)).status_text and r)
    assert record.state == "pending"
    assert record.reason == "Unschedulable"
    assert record.status_text.startswith(
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    )
    assert (
        "This run can never start here: it may run only on spot nodes "
        "(app.iguazio.com/lifecycle=preemptible), as preemption mode 'constrain' or its own node "
        "selection asks, and this machine is not one" in record.status_text
    )
    aborted = service.wait(service.abort(uid).uid, timeout=10)
    assert aborted.state == "aborted"


def test_gpu_request_on_a_machine_without_gpus_pends_with_reason(service, make_function):
    uid = service.submit(make_function(SLEEP).with_limits(gpus=1)).uid
    record = wait_for(lambda: (r := service.store.get(uid)).status_text and r)
    assert record.status_text.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert (
        "it asks for nvidia.com/gpu 1, and this machine has nvidia.com/gpu 0 in all"
        in record.status_text
    )
    service.abort(uid)


def test_running_threshold_aborts_with_status_text(service, make_function):
    fn = make_function(SLEEP)
    start = time.monotonic()
    uid = service.submit(
        fn, RunOptions(params={"seconds": 30}, state_thresholds={"running": "1s"})
    ).uid
    record = service.wait(uid, timeout=30)
    assert time.monotonic() - start < 10
    assert record.state == "aborted"
    assert record.reason == "ThresholdExceeded"
    assert record.status_text.startswith("Run aborted due to exceeded state threshold: running")
    assert [t.state for t in record.transitions][-2:] == ["aborting", "aborted"]


def test_pending_threshold_counts_from_entering_the_state(service, make_function):
    fn = make_function(SLEEP).set_state_thresholds({"pending_not_scheduled": "1s"})
    uid = service.submit(fn.with_limits(gpus=1)).uid
    record = service.wait(uid, timeout=30)
    assert record.state == "aborted"
    assert record.status_text.startswith(
        "Run aborted due to exceeded state threshold: pending_not_scheduled (last reason: "
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    )
    pending_at = next(t.at for t in record.transitions if t.state == "pending")
    assert 0.9 <= record.ended_at - pending_at < 5


@BOTH
def test_abort_running_and_pending(isolation, service, make_function):
    fn = make_function(SLEEP).with_requests(cpu=2)
    running = service.submit(fn, RunOptions(params={"seconds": 30})).uid
    wait_for(lambda: service.store.get(running).state == "running")
    pending = service.submit(fn, RunOptions(params={"seconds": 30})).uid
    wait_for(lambda: service.store.get(pending).status_text.startswith("0/1"))
    assert service.wait(service.abort(pending).uid, timeout=10).state == "aborted"
    record = service.wait(service.abort(running).uid, timeout=10)
    assert record.state == "aborted"
    assert record.attempts[0].ended_at is not None
    with pytest.raises(
        RunFinishedError,
        match="already finished .aborted.; only pending or running runs can be aborted",
    ):
        service.abort(running)


def test_environment_secrets_and_gpus_reach_the_process(monkeypatch, make_function, settings):
    monkeypatch.setenv("RUNPLANE_LOCAL__GPUS", "2")
    from runplane.config import load_settings
    from runplane.service.embedded import EmbeddedService

    service = EmbeddedService(load_settings()).start()
    try:
        secret = service.settings.local.home / "secrets" / "creds"
        secret.mkdir(parents=True)
        (secret / "token").write_text("s3cret")
        fn = make_function("""
            import os

            def handler(context):
                return {"plain": os.environ["PLAIN"], "secret_ok": os.environ["TOKEN"] == "s3cret",
                        "cuda": os.environ["CUDA_VISIBLE_DEVICES"]}
        """)
        fn.set_env("PLAIN", "value").set_env_from_secret("TOKEN", "creds", "token").gpus(1)
        record = service.wait(service.submit(fn).uid, timeout=30)
        returned = {"plain": "value", "secret_ok": True, "cuda": "0"}
        assert record.results == {**returned, "return": returned}
        assert "s3cret" not in str(record)
    finally:
        service.close()


def test_volumes_map_to_local_directories(monkeypatch, make_function, tmp_path):
    data = tmp_path / "data-dir"
    data.mkdir()
    (data / "input.txt").write_text("hello")
    monkeypatch.setenv("RUNPLANE_LOCAL__VOLUMES", f'{{"data-claim": {{"path": "{data}"}}}}')
    import runplane
    from runplane.config import load_settings
    from runplane.service.embedded import EmbeddedService

    service = EmbeddedService(load_settings()).start()
    try:
        fn = make_function("""
            from pathlib import Path

            def handler(context):
                via_context = Path(context.volume_path("/data"), "input.txt").read_text()
                via_link = Path("data/input.txt").read_text()
                return {"context": via_context, "link": via_link}
        """)
        fn.apply(runplane.mount_pvc("data-claim", "data", "/data"))
        record = service.wait(service.submit(fn).uid, timeout=30)
        assert record.results["return"] == {"context": "hello", "link": "hello"}
        unmapped = make_function("def handler(context):\n    pass\n", name="other")
        unmapped.apply(runplane.mount_pvc("other-claim", "other", "/other"))
        with pytest.raises(NotFoundError, match="'other-claim' has no local directory; map it"):
            service.submit(unmapped)
    finally:
        service.close()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"params": {"seconds": "soon"}},
            InvalidValueError,
            "params['seconds']: 'soon' is not valid; the handler expects float (example: 0.1)",
        ),
        (
            {"params": {"minutes": 1}},
            InvalidValueError,
            "params: 'minutes' is not valid; handler takes seconds",
        ),
        (
            {"state_thresholds": {"runing": "1h"}},
            InvalidValueError,
            "run(state_thresholds=...) state: 'runing' is not valid",
        ),
    ],
)
def test_bad_inputs_leave_no_run_behind(service, make_function, kwargs, error, message):
    fn = make_function(SLEEP)
    with pytest.raises(error) as caught:
        service.submit(fn, RunOptions(**kwargs))
    assert str(caught.value).startswith(message)
    assert service.store.list_runs() == []
    assert not (service.settings.local.home / "runs").exists() or not any(
        (service.settings.local.home / "runs").iterdir()
    )


def test_missing_required_parameter(service, make_function):
    fn = make_function("def handler(context, epochs: int):\n    return epochs\n")
    with pytest.raises(InvalidValueError, match="params: .* handler needs epochs"):
        service.submit(fn)
    assert service.store.list_runs() == []


def test_unknown_priority_class_is_refused_before_recording(service, make_function):
    with pytest.raises(InvalidValueError, match="valid priority classes are low, medium, high"):
        service.submit(make_function(SLEEP).with_priority_class("urgent"))
    assert service.store.list_runs() == []


def test_logs_come_in_chunks_and_a_split_character_arrives_whole(service, make_function):
    # One ASCII byte, then two-byte characters: the 1 MiB chunk boundary falls inside one.
    fn = make_function("""
        import sys

        def handler(context):
            sys.stdout.write("a" + "é" * 600_000)
    """)
    record = service.wait(service.submit(fn).uid, timeout=60)
    assert record.state == "completed", record.status_text
    first, offset = service.logs(record.uid)
    assert len(first) == offset == 1 << 20
    rest, end = service.logs(record.uid, offset)
    assert end == offset + len(rest) == 1 + 2 * 600_000
    assert service.logs(record.uid, end) == (b"", end)
    from runplane.client import RunHandle

    assert RunHandle(service, record.uid).logs() == "a" + "é" * 600_000


@BOTH
def test_usage_while_running_and_after(isolation, service, make_function):
    fn = make_function("""
        import time

        def handler(context):
            hold = b"x" * (40 * 2**20)  # written, so resident (a bytearray's zeros are not)
            end = time.time() + 30
            while time.time() < end:
                pass
    """)
    uid = service.submit(fn).uid
    # Usage is read while the run runs: its peak reaches what the handler holds (the CPU it
    # has used by then may be the interpreter's start alone, on a busy machine).
    live = wait_for(lambda: (u := service.usage(uid)).peak_memory_bytes > 40 * 2**20 and u)
    assert live.cpu_seconds > 0
    record = service.wait(service.abort(uid).uid, timeout=10)
    assert service.usage(uid) == record.usage
    assert record.usage.cpu_seconds >= live.cpu_seconds


def test_the_hint_follows_the_configured_spot_labels(monkeypatch, make_function):
    monkeypatch.setenv("RUNPLANE_PREEMPTIBLE_NODES_PRESET", "eks")
    from runplane.config import load_settings
    from runplane.service.embedded import EmbeddedService

    service = EmbeddedService(load_settings()).start()
    try:
        uid = service.submit(make_function(SLEEP).with_preemption_mode("constrain")).uid
        record = wait_for(lambda: (r := service.store.get(uid)).status_text and r)
        assert "it may run only on spot nodes (eks.amazonaws.com/capacityType=SPOT)" in (
            record.status_text
        )
        service.abort(uid)
    finally:
        service.close()


def test_the_machine_as_a_node_shows_what_runs_hold(service, make_function):
    (idle,) = service.runtime.nodes()
    assert idle.free["cpu"] == idle.allocatable["cpu"] == 2000
    uid = service.submit(
        make_function(SLEEP).with_requests(cpu="1500m"), RunOptions(params={"seconds": 30})
    ).uid
    wait_for(lambda: service.store.get(uid).state == "running")
    (busy,) = service.runtime.nodes()
    assert busy.free["cpu"] == 500
    assert service.runtime.existing()[uid][0].startswith("process ")
    service.wait(service.abort(uid).uid, timeout=10)

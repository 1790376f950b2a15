"""A local run's output through its pipe: capped however much it prints, its end kept (a failed
run's traceback), compressed once it ended, and read back by offset."""

from __future__ import annotations

import pytest

from runplane.runtimes.output import COMPRESSED


@pytest.fixture
def capped(monkeypatch: pytest.MonkeyPatch) -> int:
    cap = 64 << 10
    monkeypatch.setenv("RUNPLANE_RETENTION__MAX_OUTPUT_BYTES", str(cap))
    return cap


def output_of(service, uid: str) -> bytes:
    data, offset = b"", 0
    while True:
        chunk, offset = service.logs(uid, offset)
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize("isolation", ["cgroup", "watchdog"], indirect=True)
def test_a_chatty_failing_run_keeps_its_start_and_its_traceback(capped, service, make_function):
    fn = make_function("""
        def handler(context):
            for i in range(40000):
                print(f"step {i:06d}", flush=i % 1000 == 0)
            raise ValueError("the last words")
    """)
    record = service.wait(service.submit(fn).uid, timeout=60)
    assert record.state == "error", record.status_text
    output = output_of(service, record.uid)
    assert output.startswith(b"step 000000\n")
    assert b" bytes of output were dropped here (a run keeps 65536 bytes" in output
    assert b"step 039999\n" in output
    assert output.rstrip().endswith(b"ValueError: the last words")
    assert len(output) < capped + 200
    run_dir = service.settings.local.home / "runs" / record.uid
    assert (run_dir / COMPRESSED).exists()
    assert not (run_dir / "output.pipe").exists()

"""A run's stop as the kubelet's: SIGTERM first, SIGKILL once the grace is over."""

from __future__ import annotations

from runplane.runtimes.local.stopping import DEFAULT_GRACE_SECONDS, Stop


class Process:
    def __init__(self) -> None:
        self.signals: list[str] = []

    def terminate(self) -> None:
        self.signals.append("TERM")

    def kill(self) -> None:
        self.signals.append("KILL")


def test_nothing_happens_before_a_stop_is_asked_for():
    process, stop = Process(), Stop()
    assert stop.grace == DEFAULT_GRACE_SECONDS == 30
    assert stop.advance(process, lambda: process.signals.append("ALL")) is None
    assert process.signals == []
    assert stop.told() == ""


def test_sigterm_then_sigkill_to_all_once_the_grace_is_over():
    process, stop = Process(), Stop(grace=2)
    assert stop.ask()
    wait = stop.advance(process, lambda: process.signals.append("ALL"))
    assert wait is not None
    assert 1000 < wait <= 2000
    assert process.signals == ["TERM"]
    assert stop.advance(process, lambda: process.signals.append("ALL")) is not None
    assert process.signals == ["TERM"]  # SIGTERM once
    assert stop.ask(0.0)  # brought forward: due now
    assert stop.advance(process, lambda: process.signals.append("ALL")) is None
    assert process.signals == ["TERM", "KILL", "ALL"]
    assert stop.told().startswith("still running ")
    assert stop.told().endswith(" s after SIGTERM, it was killed with SIGKILL (grace period 2 s)")


def test_asking_again_never_puts_the_kill_off():
    stop = Stop(grace=2)
    assert stop.ask()
    due = stop.kill_at
    assert not stop.ask()
    assert not stop.ask(60)
    assert stop.kill_at == due


def test_a_process_that_ends_in_its_grace_is_told_so():
    process, stop = Process(), Stop(grace=5)
    stop.ask()
    stop.advance(process, lambda: None)
    assert stop.told().startswith("it ended ")
    assert stop.told().endswith(" s after SIGTERM, within its grace period of 5 s")


def test_a_stop_due_at_once_is_sigkill_alone():
    process, stop = Process(), Stop()
    stop.ask(0.0)
    stop.advance(process, lambda: process.signals.append("ALL"))
    assert process.signals == ["KILL", "ALL"]
    assert stop.told() == ""  # a shutdown's: its own message says why
    process, stop = Process(), Stop(grace=0)
    stop.ask()
    stop.advance(process, lambda: None)
    assert process.signals == ["KILL"]
    assert stop.told() == "it was killed with SIGKILL (grace period 0 s)"

"""Which cgroup v2 controllers runs are given where a host delegates only some of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from runplane.runtimes.local.cgroups import delegated


def offering(tmp_path: Path, controllers: str) -> Path:
    (tmp_path / "cgroup.controllers").write_text(controllers + "\n")
    return tmp_path


@pytest.mark.parametrize(
    ("offered", "given"),
    [
        ("cpuset cpu io memory hugetlb pids", ("memory", "cpu", "pids")),
        ("memory", ("memory",)),  # a VM agent's command cgroup: memory alone
        ("memory pids", ("memory", "pids")),
        ("cpu memory", ("memory", "cpu")),
    ],
)
def test_runs_are_given_the_delegated_controllers_they_use(tmp_path, offered, given):
    assert delegated(offering(tmp_path, offered)) == given


def test_without_memory_every_controller_is_asked_for_so_the_refusal_names_them(tmp_path):
    assert delegated(offering(tmp_path, "cpu pids")) == ("memory", "cpu", "pids")
    assert delegated(tmp_path) == ("memory", "cpu", "pids")  # no file: nothing is offered

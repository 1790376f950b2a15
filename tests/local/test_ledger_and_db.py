"""The capacity ledger's queue order, and the database schema against its migrations."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runplane.placement import Node
from runplane.runtimes.local.ledger import Claim, Ledger


def ledger(tmp_path, cpu=2000, gpus=()):
    node = Node(
        name="here",
        allocatable={
            "cpu": cpu,
            "memory": 8 * 2**30,
            "pods": 110,
            **({"nvidia.com/gpu": len(gpus)} if gpus else {}),
        },
    )
    return Ledger(tmp_path / "capacity.db", node, cpu_ids=[0, 1], gpu_ids=gpus)


def claim(uid, priority, submitted, cpu, cores=0, gpus=0):
    requests = {"cpu": cpu, **({"nvidia.com/gpu": gpus} if gpus else {})}
    return Claim(uid, priority, submitted, requests, cores, gpus)


def test_priority_then_submit_time_and_no_head_of_line_blocking(tmp_path):
    book = ledger(tmp_path)
    book.wait(claim("a-low-early", 1, 1.0, 1500))
    book.wait(claim("b-high-late", 3, 2.0, 1500))
    book.wait(claim("c-low-small", 1, 3.0, 500))
    granted = [g.uid for g in book.grant(["a-low-early", "b-high-late", "c-low-small"])]
    assert granted == ["b-high-late", "c-low-small"]
    book.release("b-high-late")
    assert [g.uid for g in book.grant(["a-low-early"])] == ["a-low-early"]


def test_capacity_a_higher_claim_will_take_is_not_given_away(tmp_path):
    book = ledger(tmp_path)
    book.wait(claim("mine-low", 1, 1.0, 1500))
    book.wait(claim("theirs-high", 3, 2.0, 1500))
    assert book.grant(["mine-low"]) == []  # "theirs-high" comes first and takes the room
    assert [g.uid for g in book.grant(["theirs-high"])] == ["theirs-high"]


def test_claims_of_dead_processes_are_dropped(tmp_path):
    # Another process takes the whole machine and dies holding it.
    other = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_ledger_and_db import claim, ledger
        from pathlib import Path
        book = ledger(Path({str(tmp_path)!r}))
        book.wait(claim("orphan", 1, 1.0, 2000))
        assert [g.uid for g in book.grant(["orphan"])] == ["orphan"]
    """)
    subprocess.run([sys.executable, "-c", other], check=True)
    book = ledger(tmp_path)
    assert book.occupied().requested == {"cpu": 2000}
    book.wait(claim("next", 1, 2.0, 2000))
    assert [g.uid for g in book.grant(["next"])] == ["next"]
    book.release("next")
    assert book.occupied().requested == {}, "the dead process's claim is gone for good"


def test_cores_spread_and_gpus_are_exclusive(tmp_path):
    book = ledger(tmp_path, cpu=4000, gpus=("0", "1", "2"))
    book.wait(claim("one", 1, 1.0, 1000, cores=1, gpus=2))
    book.wait(claim("two", 1, 2.0, 1000, cores=1, gpus=1))
    book.wait(claim("three", 1, 3.0, 1000, cores=1, gpus=1))
    grants = {g.uid: g for g in book.grant(["one", "two", "three"])}
    assert set(grants) == {"one", "two"}  # three GPUs, three asked for before "three"
    assert grants["one"].gpu_ids == ("0", "1")
    assert grants["two"].gpu_ids == ("2",)
    assert {grants["one"].cpu_ids, grants["two"].cpu_ids} == {(0,), (1,)}
    elsewhere = ledger(tmp_path, cpu=4000, gpus=("0", "1", "2"))  # as another process sees it
    assert elsewhere.occupied().requested == {"cpu": 2000, "nvidia.com/gpu": 3}


def test_models_match_the_migrations(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from runplane.service.db import connect, sqlite_url
    from runplane.service.db.models import Base

    engine = connect(sqlite_url(tmp_path / "runplane.db"))
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert differences == []


def test_a_running_claim_grows_only_within_its_projects_quota(tmp_path):
    from runplane.placement.quotas import ProjectQuota

    book = ledger(tmp_path)
    book.set_quotas(
        {"team-a": ProjectQuota({"on-demand": ProjectQuota.flavor_of("q", {"cpu": "1"})})}
    )
    book.wait(Claim("run", 1, 1.0, {"cpu": 500}, 0, 0, project="team-a"))
    assert [g.uid for g in book.grant(["run"])] == ["run"]
    assert book.grow("run", {"cpu": 500}) == ""  # up to its quota: 1 CPU
    refused = book.grow("run", {"cpu": 500})
    assert refused == "project team-a's quota on on-demand cannot hold it: it needs 0.5 CPUs more"
    assert book.occupied().requested == {"cpu": 1000}, "a refused growth holds nothing more"
    assert book.grow("run", {"cpu": -500}) == "", "a smaller run is never held back by quota"


def test_a_quota_table_set_by_one_process_decides_every_other_on_the_machine(tmp_path):
    from runplane.placement.quotas import ProjectQuota

    ours, theirs = ledger(tmp_path), ledger(tmp_path)  # two processes' ledgers, one file
    half = {"team-a": ProjectQuota({"on-demand": ProjectQuota.flavor_of("q", {"cpu": "500m"})})}
    theirs.set_quotas(half)
    ours.wait(Claim("first", 1, 1.0, {"cpu": 500}, 0, 0, project="team-a"))
    ours.wait(Claim("second", 1, 2.0, {"cpu": 500}, 0, 0, project="team-a"))
    assert [g.uid for g in ours.grant(["first", "second"])] == ["first"]
    assert ours.quotas == half  # read from the ledger: ours was never handed a table
    assert "needs 0.5 CPUs more" in ours.quota_waits["second"]
    read = ours.quotas
    assert ours.grant(["second"]) == []
    assert ours.quotas is read, "an unchanged table is not read again"
    assert ours.grow("first", {"cpu": 500}).startswith("project team-a's quota on on-demand")

    theirs.set_quotas(half)  # the same table again: nothing changes, no generation
    assert ours.grant(["second"]) == []
    assert ours.quotas is read

    theirs.set_quotas({})  # an admin clears it in the other process
    assert [g.uid for g in ours.grant(["second"])] == ["second"]
    assert ours.quotas == {}
    assert ours.quota_waits == {}
    ours.close()
    theirs.close()


def test_a_grow_the_quota_refuses_is_no_reason_for_a_larger_retry(tmp_path):
    """A retry at the size asked would wait on the same quota; the machine's room may free."""
    from runplane.placement.quotas import ProjectQuota
    from runplane.runtimes.local.resize import Refused, resize
    from runplane.runtimes.resizing import Sizes

    book = ledger(tmp_path)
    book.set_quotas(
        {"team-a": ProjectQuota({"on-demand": ProjectQuota.flavor_of("q", {"memory": "256Mi"})})}
    )
    book.wait(Claim("run", 1, 1.0, {"memory": 128 << 20}, 0, 0, project="team-a"))
    assert [g.uid for g in book.grant(["run"])] == ["run"]
    sizes = Sizes(memory=128 << 20, cpu=None)
    with pytest.raises(Refused) as by_quota:
        resize("run", 1, sizes, None, book.grow, 512 << 20, None, "near its limit")
    assert "quota" in str(by_quota.value)
    assert not by_quota.value.for_room
    with pytest.raises(Refused) as by_room:
        resize("run", 1, sizes, None, lambda uid, more: "no room", 512 << 20, None, "near")
    assert by_room.value.for_room


def test_a_quota_table_this_runplane_cannot_read_keeps_the_one_held(tmp_path):
    from runplane.placement.quotas import ProjectQuota

    ours, theirs = ledger(tmp_path), ledger(tmp_path)
    half = {"team-a": ProjectQuota({"on-demand": ProjectQuota.flavor_of("q", {"cpu": "500m"})})}
    theirs.set_quotas(half)
    ours.wait(Claim("first", 1, 1.0, {"cpu": 500}, 0, 0, project="team-a"))
    assert [g.uid for g in ours.grant(["first"])] == ["first"]
    newer = {"team-a": {"on-demand": {"cpu": {"nominal": "1", "newer": 1}}}}
    with sqlite3.connect(tmp_path / "capacity.db") as raw:  # a newer runplane's field
        raw.execute(
            "UPDATE quotas SET generation = generation + 1, quota_table = ?",
            (json.dumps(newer),),
        )
    ours.wait(Claim("second", 1, 2.0, {"cpu": 500}, 0, 0, project="team-a"))
    assert ours.grant(["second"]) == [], "admission goes on by the table held"
    assert ours.quotas == half
    ours.close()
    theirs.close()

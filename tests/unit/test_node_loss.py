"""A deleted node's runs are lost at once: the pure mapping and the node book."""

from __future__ import annotations

from typing import Any

import orjson

from runplane import names
from runplane.config import Settings
from runplane.runs import FailureClass, RunState, classify
from runplane.runtimes.kubernetes.api.watch import ADDED, DELETED, MODIFIED, VANISHED
from runplane.runtimes.kubernetes.nodes import NodeBook
from runplane.runtimes.kubernetes.pod_events import node_lost_event
from runplane.runtimes.kubernetes.views import NODES
from tests.unit.test_kubernetes_events import UID, pod


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels}}


def test_a_running_or_starting_pod_on_a_deleted_node_is_lost() -> None:
    for phase in ("Running", "Pending"):
        event = node_lost_event(pod(phase, node="spot-1"), "spot-1")
        assert event is not None
        assert (event.uid, event.attempt, event.state) == (UID, 2, RunState.ERROR)
        assert event.reason == "NodeLost"
        assert event.message.startswith("node spot-1 was deleted while the run was on it")
        assert classify(event.state, event.reason, event.message) is FailureClass.NODE_LOST


def test_what_had_ended_or_was_being_aborted_is_not_lost() -> None:
    assert node_lost_event(pod("Succeeded", node="n"), "n") is None
    assert node_lost_event(pod("Failed", node="n"), "n") is None
    assert node_lost_event(pod("Running", node="n", labels={}), "n") is None
    notes = {names.ABORT_REASON: "Aborted", names.ABORT_MESSAGE: "by request"}
    aborted = node_lost_event(pod("Running", node="n", annotations=notes), "n")
    assert aborted is not None
    assert (aborted.state, aborted.reason) == (RunState.ABORTED, "Aborted")


def test_the_node_book_knows_groups_and_spot_and_reports_losses() -> None:
    lost: list[tuple[str, str, bool | None]] = []
    book = NodeBook(Settings().spot, lambda *args: lost.append(args))
    book.observe(
        ADDED, node("spot-1", **{names.NODE_GROUP: "spot"}, **Settings().spot.node_selector)
    )
    book.observe(ADDED, node("od-1", **{names.NODE_GROUP: "on-demand"}))
    book.observe(MODIFIED, node("od-1", **{names.NODE_GROUP: "on-demand"}))
    assert book.describe("spot-1") == ("spot", True)
    assert book.describe("od-1") == ("on-demand", False)
    assert book.describe("unknown") == ("", None)
    book.observe(DELETED, node("spot-1"))
    book.observe(VANISHED, node("od-1"))
    book.observe(DELETED, node("never-seen"))
    assert lost == [
        ("spot-1", "spot", True),
        ("od-1", "on-demand", False),
        ("never-seen", "", None),
    ]
    assert book.describe("spot-1") == ("", None)


def test_runplanes_own_delete_of_a_lost_pod_reads_as_the_loss() -> None:
    from runplane.runtimes.kubernetes.tracker import RunTracker

    published: list[Any] = []
    tracker = RunTracker(published.append)
    running = pod("Running", node="spot-1")
    tracker.observe(MODIFIED, running)
    loss = node_lost_event(running, "spot-1")
    tracker.losing("pod-uid-1", loss)
    tracker.observe(DELETED, running)  # the watch sees the delete before the deleter returns
    tracker.lost("pod-uid-1")
    assert [(e.state, e.reason) for e in published] == [
        (RunState.RUNNING, "Running"),
        (RunState.ERROR, "NodeLost"),
    ]
    # A loss called off (the pod changed before the delete) leaves its delete as it was.
    tracker.observe(ADDED, running | {"metadata": running["metadata"] | {"uid": "pod-uid-2"}})
    tracker.losing("pod-uid-2", loss)
    tracker.losing("pod-uid-2", None)
    tracker.lost("pod-uid-2")
    assert published[-1].reason == "Running"


def test_the_node_watch_reads_what_the_book_reads_and_no_status() -> None:
    """What the watch decodes of a node is enough for the book (a vanished node found by a
    re-list is reported from it) and for telling a changed node from the same one."""
    labels = {names.NODE_GROUP: "spot", **Settings().spot.node_selector}
    whole = node("spot-1", **labels)
    whole["metadata"] |= {"resourceVersion": "7", "managedFields": [{"manager": "kwok"}]}
    whole["status"] = {"conditions": [{"type": "Ready", "lastHeartbeatTime": "now"}]}
    whole["spec"] = {"taints": []}
    slim = NODES.event(orjson.dumps({"type": "ADDED", "object": whole}))["object"]
    assert slim == {
        "metadata": {
            "name": "spot-1",
            "uid": "uid-spot-1",
            "resourceVersion": "7",
            "labels": labels,
        }
    }
    lost: list[tuple[str, str, bool | None]] = []
    book = NodeBook(Settings().spot, lambda *args: lost.append(args))
    book.observe(ADDED, slim)
    assert book.describe("spot-1") == ("spot", True)
    book.observe(VANISHED, slim)
    assert lost == [("spot-1", "spot", True)]

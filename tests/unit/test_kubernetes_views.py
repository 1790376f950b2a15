"""What the watches decode of pods and nodes (runtimes/kubernetes/views.py): the fields their
readers use, as the API sent them, and nothing of the rest."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from runplane import names
from runplane.runtimes.kubernetes.autoresize import limits_of
from runplane.runtimes.kubernetes.kueue import ADMISSION_GATE, QUEUE_LABEL
from runplane.runtimes.kubernetes.pod_events import kept, main_container, pod_to_event
from runplane.runtimes.kubernetes.views import NODES, PODS
from tests.unit.test_kubernetes_events import (
    T1,
    T2,
    disruption,
    pod,
    scheduled,
    terminated,
    waiting,
)


def whole(base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with what a pod from the API also carries and nothing here reads."""
    full = orjson.loads(orjson.dumps(base))
    full["apiVersion"], full["kind"] = "v1", "Pod"
    full["metadata"] |= {
        "namespace": "runs",
        "resourceVersion": "42",
        "managedFields": [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {}}}],
    }
    spec = full["spec"]
    spec["volumes"] = [{"name": "runplane-run", "emptyDir": {}}]
    spec["restartPolicy"] = "Never"
    for container in spec["containers"]:
        container["env"] = [{"name": "RUNPLANE_RUN_UID", "value": "x"}]
        container["volumeMounts"] = [{"name": "runplane-run", "mountPath": "/runplane/run"}]
        container["resources"] = {"limits": {"memory": "64Mi", "cpu": "1"}}
    return full


def decoded(obj: dict[str, Any], kind: str = "MODIFIED") -> dict[str, Any]:
    event = PODS.event(orjson.dumps({"type": kind, "object": obj}))
    assert event["type"] == kind
    return event["object"]  # type: ignore[no-any-return]


def gated() -> dict[str, Any]:
    """A pod Kueue holds in its queue."""
    held = pod(labels={names.RUN_UID: "r1", names.ATTEMPT: "1", QUEUE_LABEL: "team"})
    held["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
    return held


PODS_SEEN = [
    pod(),
    gated(),
    pod(conditions=[scheduled("False", "Unschedulable", "0/3 nodes are available")]),
    pod(node="n1", containers=waiting("ImagePullBackOff", "no such image")),
    pod("Running", node="n1", containers=[{"name": "main", "state": {"running": {}}}]),
    pod("Succeeded", node="n1", containers=terminated(0, "Completed", message='{"a": 1}')),
    pod("Failed", node="n1", containers=terminated(137, "OOMKilled")),
    pod("Failed", node="n1", conditions=[disruption("PreemptionByScheduler", "preempted")]),
    pod("Running", node="n1", deletionTimestamp=T2, deletionGracePeriodSeconds=30),
    pod(annotations={names.ABORT_REASON: "ThresholdExceeded", names.ABORT_MESSAGE: "late"}),
    pod(ownerReferences=[{"kind": "MPIJob", "name": "train", "uid": "o-1"}]),
]


@pytest.mark.parametrize("seen", PODS_SEEN)
def test_a_decoded_pod_says_of_its_run_what_the_whole_pod_says(seen: dict[str, Any]) -> None:
    full = whole(seen)
    slim = decoded(full)
    for deleted in (False, True):
        ours, theirs = pod_to_event(slim, deleted=deleted), pod_to_event(full, deleted=deleted)
        assert (ours is None) == (theirs is None)
        if ours is not None and theirs is not None:  # made a moment apart
            assert replace(ours, at=0.0) == replace(theirs, at=0.0)
    assert main_container(slim) == main_container(full)
    assert limits_of(slim) == limits_of(full)
    assert kept(slim) == kept(full) | {"metadata": slim["metadata"]}
    assert slim["metadata"] == {k: v for k, v in full["metadata"].items() if k != "managedFields"}
    assert slim["status"] == full["status"]


def test_a_decoded_pod_holds_nothing_else() -> None:
    gated = whole(pod())
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    gated["spec"]["nodeName"] = "n1"
    assert decoded(gated, "ADDED") == {
        "metadata": {k: v for k, v in gated["metadata"].items() if k != "managedFields"},
        "spec": {
            "nodeName": "n1",
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
            "containers": [
                {"name": "main", "resources": {"limits": {"memory": "64Mi", "cpu": "1"}}}
            ],
        },
        "status": gated["status"],
    }


def test_a_bookmark_and_a_deletion_decode_as_events_of_the_kind() -> None:
    assert decoded({"metadata": {"resourceVersion": "77"}}, "BOOKMARK") == {
        "metadata": {"resourceVersion": "77"}
    }
    assert decoded(whole(pod("Running", node="n1", deletionTimestamp=T1)), "DELETED")


def test_an_error_event_is_decoded_whole() -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "too old resource version: 5 (40)",
        "reason": "Expired",
        "code": 410,
    }
    assert PODS.event(orjson.dumps({"type": "ERROR", "object": status})) == {
        "type": "ERROR",
        "object": status,
    }


def test_no_value_of_a_field_read_fails_the_decode() -> None:
    """Leaves are taken as the API sends them: a watch must never stop on an object."""
    odd = whole(pod())
    odd["metadata"]["labels"] = None
    odd["metadata"]["annotations"] = {"a": {"nested": [1, 2]}}
    odd["spec"]["nodeName"] = None
    odd["spec"]["containers"][0]["resources"] = "unexpected"
    odd["status"] = {"phase": None, "conditions": "odd"}
    slim = decoded(odd)
    assert slim["metadata"]["labels"] is None
    assert slim["spec"]["containers"][0]["resources"] == "unexpected"
    assert slim["status"] == odd["status"]


def test_a_page_of_a_list_keeps_its_version_and_continue_token() -> None:
    page = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "90", "continue": "token", "remainingItemCount": 3},
        "items": [whole(pod()), whole(pod("Running", node="n1"))],
    }
    listed = PODS.page(orjson.dumps(page))
    assert listed["metadata"] == {"resourceVersion": "90", "continue": "token"}
    assert listed["items"] == [decoded(item) for item in page["items"]]


def test_a_node_is_its_name_version_and_labels() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "n1",
            "uid": "u1",
            "resourceVersion": "3",
            "labels": {names.NODE_GROUP: "cpu"},
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "managedFields": [{"manager": "kwok"}],
        },
        "spec": {"taints": []},
        "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": T1}]},
    }
    event = NODES.event(orjson.dumps({"type": "MODIFIED", "object": node}))
    assert event == {
        "type": "MODIFIED",
        "object": {
            "metadata": {
                "name": "n1",
                "uid": "u1",
                "resourceVersion": "3",
                "labels": {names.NODE_GROUP: "cpu"},
            }
        },
    }
    page = NODES.page(orjson.dumps({"metadata": {"resourceVersion": "4"}, "items": [node]}))
    assert page["items"] == [event["object"]]

"""``runplane get deployments`` on a cluster: a serving function's Deployment, its autoscaler
and its pods read as the local runtime reports its replicas (the real cluster's side is
``tests/integration/test_real_node_serving.py``)."""

from __future__ import annotations

from typing import Any

from runplane import names
from runplane.runtimes.kubernetes import deploy


class Listed:
    """What the API server lists per collection path; the queries it was asked."""

    namespace = "runs"

    def __init__(self, **items: list[dict[str, Any]]) -> None:
        self.items = items
        self.queries: dict[str, str] = {}

    def read(self, what: str, path: str, query: dict[str, str]) -> dict[str, Any]:
        kind = path.rsplit("/", 1)[1]
        self.queries[kind] = query["labelSelector"]
        return {"items": self.items.get(kind, [])}


def labelled(name: str, **extra: Any) -> dict[str, Any]:
    labels = {names.PROJECT: "default", names.FUNCTION: "echo"}
    return {"metadata": {"name": name, "labels": labels, **extra}}


DEPLOYMENT = labelled("echo", annotations={names.DEPLOYED_BY: "ann"}) | {
    "spec": {"replicas": 2},
    "status": {"readyReplicas": 1},
}
CPU = {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 480}}}
AUTOSCALER = labelled("echo") | {
    "spec": {
        "minReplicas": 1,
        "maxReplicas": 3,
        "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"averageUtilization": 75}}}
        ],
    },
    "status": {
        "currentReplicas": 1,
        "desiredReplicas": 2,
        "lastScaleTime": "2026-11-26T11:00:00Z",
        "currentMetrics": [CPU],
        "conditions": [{"type": "ScalingActive", "status": "True"}],
    },
}


def pod(name: str, created: str, ready: bool, restarts: int) -> dict[str, Any]:
    status = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": str(ready)}],
        "containerStatuses": [{"restartCount": restarts}],
    }
    return labelled(name, creationTimestamp=created) | {"status": status}


def test_a_deployment_is_listed_with_its_autoscaler_and_its_replicas():
    calls = Listed(
        deployments=[DEPLOYMENT],
        horizontalpodautoscalers=[AUTOSCALER],
        pods=[pod("echo-b", "2026-11-26T11:00:05Z", False, 0), pod("echo-a", "2026", True, 2)],
    )
    (echo,) = deploy.listing(calls, 80)  # type: ignore[arg-type]
    assert echo == {
        "project": "default",
        "name": "echo",
        "owner": "ann",
        "state": "degraded",
        "desired": 2,
        "ready": 1,
        "min_replicas": 1,
        "max_replicas": 3,
        "scaling": "CPU 480% of request against a target of 75%: 1 -> 2 replica(s) "
        "(last step at 2026-11-26T11:00:00Z)",
        "replicas": [
            {"index": 0, "pod": "echo-a", "state": "ready", "restarts": 2},
            {"index": 1, "pod": "echo-b", "state": "running", "restarts": 0},
        ],
        "url": "http://echo.runs.svc:80",
    }
    # a run's pods carry the function's labels too, never as a replica
    assert calls.queries["pods"].endswith(f",!{names.RUN_UID}")


def test_a_deployment_without_autoscaler_has_no_bounds_and_no_scaling():
    calls = Listed(deployments=[DEPLOYMENT])
    (echo,) = deploy.listing(calls, 80)  # type: ignore[arg-type]
    assert (echo["min_replicas"], echo["max_replicas"], echo["scaling"]) == (None, None, "")
    assert echo["replicas"] == []


def test_an_autoscaler_without_metrics_says_why_it_does_not_scale():
    blind = AUTOSCALER | {
        "status": {
            "currentReplicas": 1,
            "desiredReplicas": 1,
            "conditions": [
                {
                    "type": "ScalingActive",
                    "status": "False",
                    "reason": "FailedGetResourceMetric",
                    "message": "the HPA was unable to compute the replica count: failed to get "
                    "cpu utilization: unable to get metrics for resource cpu",
                }
            ],
        }
    }
    assert deploy.scaling_of(blind) == (
        "not scaling: the HPA was unable to compute the replica count: failed to get cpu "
        "utilization: unable to get metrics for resource cpu"
    )
    assert deploy.scaling_of(AUTOSCALER | {"status": {}}) == ""

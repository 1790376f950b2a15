"""Would a pod fit a node, and if not, why - in kube-scheduler's own words."""

from runplane.placement.evaluate import Evaluation, evaluate, refusals
from runplane.placement.gang import GangFit, fit_all
from runplane.placement.model import Node, NodeSummary, PodRequirements, Taint, pod_requests

__all__ = [
    "Evaluation",
    "GangFit",
    "Node",
    "NodeSummary",
    "PodRequirements",
    "Taint",
    "evaluate",
    "fit_all",
    "pod_requests",
    "refusals",
]

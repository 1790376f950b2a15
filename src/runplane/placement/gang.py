"""Whether every pod of a multi-pod run fits the nodes at once (gang placement).

A run of several pods (an mpijob's launcher and workers, a spark driver and its executors) is
useful only whole: half of it placed holds cores and GPUs while it waits for the rest. So the
question is not "does each pod fit somewhere" but "is there room for all of them together":
the pods are placed one after another on copies of the nodes, each one's requests reserved
before the next is tried, the largest first (GPUs, then CPU, then memory), each on the fitting
node it leaves the least room on, so small pods do not take the room a large one needs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runplane.placement.evaluate import evaluate
from runplane.placement.model import Node, PodRequirements


@dataclass(frozen=True, slots=True)
class GangFit:
    """A node per pod, in the order given, when all fit; else why the first that did not."""

    nodes: list[str]
    message: str = ""

    @property
    def fits(self) -> bool:
        return not self.message


def _size(pod: PodRequirements) -> tuple[int, int, int]:
    gpus = sum(v for k, v in pod.requests.items() if k not in ("cpu", "memory", "pods"))
    return gpus, pod.requests.get("cpu", 0), pod.requests.get("memory", 0)


def _room_left(node: Node, pod: PodRequirements) -> tuple[int, int]:
    return (
        node.free("cpu") - pod.requests.get("cpu", 0),
        node.free("memory") - pod.requests.get("memory", 0),
    )


def fit_all(pod_specs: Sequence[Mapping[str, Any]], nodes: Iterable[Node]) -> GangFit:
    """Place every pod of ``pod_specs`` on ``nodes`` (as they are now) at once, or say why not.

    The message is the scheduler's verdict for the pod that found no room, after its
    companions took theirs: ``4 pods must start together and 2 fit; the next: 0/3 nodes are
    available: 3 Insufficient cpu.``
    """
    working = [copy.deepcopy(node) for node in nodes]
    pods = [PodRequirements.from_pod_spec(spec) for spec in pod_specs]
    placed = [""] * len(pods)
    order = sorted(range(len(pods)), key=lambda i: _size(pods[i]), reverse=True)
    for count, index in enumerate(order):
        pod = pods[index]
        verdict = evaluate(pod, working)
        if not verdict.fits:
            return GangFit(
                [],
                f"{len(pods)} pods must start together and {count} fit; the next: "
                f"{verdict.message}",
            )
        fitting = set(verdict.fits)
        node = min((n for n in working if n.name in fitting), key=lambda n: _room_left(n, pod))
        node.reserve(pod.requests)
        placed[index] = node.name
    return GangFit(placed)

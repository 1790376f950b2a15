"""A run of an operator's workload on a cluster that lacks the operator fails at submission,
saying which operator and CRD are missing and how to install them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import runplane
from runplane.config import Settings
from runplane.errors import ConflictError
from runplane.runtimes.kubernetes.submit import Submitter
from runplane.runtimes.request import build_request


class Discovery:
    """What the API server serves, as ``Calls.serves`` reports it; each question recorded."""

    namespace = "default"

    def __init__(self, served: set[tuple[str, str]]) -> None:
        self.served = served
        self.asked: list[tuple[str, str, bool]] = []

    def serves(self, api_version: str, plural: str, fresh: bool = False) -> bool:
        self.asked.append((api_version, plural, fresh))
        return (api_version, plural) in self.served


def _manifests(tmp_path: Path, version: str) -> list[dict[str, Any]]:
    code = tmp_path / "train.py"
    code.write_text("def train(context):\n    return 1\n")
    fn = runplane.code_to_function("trainer", filename=str(code), kind="mpijob", handler="train")
    fn.spec.replicas = 2
    return build_request(fn, Settings(mpijob_api_version=version), uid="u" * 32).manifests


def test_an_mpijob_without_the_mpi_operator_is_refused_naming_it(tmp_path):
    discovery = Discovery(set())
    submitter = Submitter(discovery, None)  # type: ignore[arg-type]
    with pytest.raises(ConflictError) as refused:
        submitter.check_served(_manifests(tmp_path, "kubeflow.org/v2beta1"))
    message = str(refused.value)
    assert "the Kubeflow MPI Operator" in message
    assert "mpijobs.kubeflow.org" in message
    assert "mpi-operator/v0.8.0/deploy/v2beta1/mpi-operator.yaml" in message
    # discovery is asked now, not from what was known before
    assert discovery.asked == [("kubeflow.org/v2beta1", "mpijobs", True)]


def test_the_training_operator_is_named_for_a_v1_mpijob(tmp_path):
    submitter = Submitter(Discovery(set()), None)  # type: ignore[arg-type]
    with pytest.raises(ConflictError, match="the Kubeflow Training Operator"):
        submitter.check_served(_manifests(tmp_path, "kubeflow.org/v1"))


def test_a_served_mpijob_passes_with_one_question(tmp_path):
    discovery = Discovery({("kubeflow.org/v2beta1", "mpijobs")})
    Submitter(discovery, None).check_served(_manifests(tmp_path, "kubeflow.org/v2beta1"))  # type: ignore[arg-type]
    assert discovery.asked == [("kubeflow.org/v2beta1", "mpijobs", True)]

"""MLRun's shapes of a function and its settings: its dict form read and written back, mlconf's
nested sections, KubeResourceSpec's filled resources, method handlers, and MLRun's errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import runplane
from runplane import settings_view
from runplane.errors import InvalidValueError
from runplane.runtimes.pod import KubeResourceSpec
from runplane.spec.handler import read_signature
from runplane.spec.labels import check_run_name

VALID_CLASSES = "RUNPLANE_PRIORITY_CLASSES__VALID"


def mlrun_dict() -> dict[str, Any]:
    return {
        "kind": "job",
        "metadata": {"name": "train", "project": "default", "hash": "abc", "credentials": {}},
        "spec": {
            "command": "train.py",
            "mode": "pass",
            "affinity": None,
            "tolerations": None,
            "node_selector": "",
            "priority_class_name": "",
            "state_thresholds": {"executing": "2h", "pending_scheduled": "1h"},
        },
        "verbose": False,
    }


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """mlconf's kept settings, fresh for the test."""
    fresh: dict[str, Any] = {"function": {"spec": {"image_pull_secret": {"default": None}}}}
    monkeypatch.setattr(settings_view, "_KEPT", fresh)
    return fresh


def test_mlrun_dict_form_comes_back_as_given_with_the_preemption_mode(kept):
    fn = runplane.new_function(runtime=mlrun_dict())
    expected = mlrun_dict()
    expected["spec"]["preemption_mode"] = runplane.mlconf.function_defaults.preemption_mode
    assert fn.to_dict() == expected
    assert fn.spec.state_thresholds["running"] == "2h"  # MLRun's executing, runplane's running


def test_a_change_shows_in_the_mlrun_layout_and_exclude_leaves_a_section_out(kept):
    fn = runplane.new_function(name="renamed", runtime=mlrun_dict())
    fn.with_limits(mem="1G").with_node_selection(node_selector={"pool": "a"})
    data = fn.to_dict()
    assert data["metadata"]["name"] == "renamed"
    assert data["spec"]["resources"] == {"limits": {"memory": "1G"}}
    assert data["spec"]["node_selector"] == {"pool": "a"}
    assert data["spec"]["tolerations"] is None  # still empty: MLRun's empty form
    assert "spec" not in fn.to_dict(exclude=["spec"])


def test_mlconf_sections_read_as_attributes_and_keep_what_is_set(kept):
    thresholds = runplane.mlconf.function.spec.state_thresholds.default.to_dict()
    assert "executing" in thresholds
    assert "running" not in thresholds
    runplane.mlconf.function.spec.image_pull_secret.default = "registry"
    assert runplane.mlconf.function.spec.image_pull_secret.default == "registry"
    fn = runplane.new_function(runtime=mlrun_dict())
    assert fn.spec.image_pull_secret == "registry"


@pytest.fixture
def valid_classes_restored() -> Iterator[None]:
    """mlconf writes the variable itself: it is put back as it was, and the settings read
    again, after the test, or every later test of the process would see its classes."""
    before = os.environ.get(VALID_CLASSES)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(VALID_CLASSES, None)
        else:
            os.environ[VALID_CLASSES] = before
        runplane.mlconf.reload()


def test_valid_priority_classes_are_set_comma_separated(valid_classes_restored):
    os.environ.pop(VALID_CLASSES, None)
    runplane.mlconf.valid_function_priority_class_names = "low, urgent"
    assert os.environ[VALID_CLASSES] == '["low", "urgent"]'
    assert runplane.mlconf.valid_function_priority_class_names == "low,urgent"
    assert runplane.new_function("f").list_valid_priority_class_names() == ["low", "urgent"]


def test_kube_resource_spec_is_filled_from_the_pod_defaults_and_checked(kept):
    runplane.mlconf.default_function_pod_resources = {
        "requests": {"cpu": "25m", "memory": "1M", "gpu": None},
        "limits": {"cpu": "2", "memory": "1G", "gpu": None},
    }
    spec = KubeResourceSpec(
        resources={"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}}
    )
    assert spec.resources == {
        "requests": {"cpu": "25m", "memory": "1M"},  # a GPU equal to its limit: limits only
        "limits": {"cpu": "2", "memory": "1G", "nvidia.com/gpu": "2"},
    }
    with pytest.raises(InvalidValueError, match="'1wrong' is not valid"):
        KubeResourceSpec(resources={"requests": {"cpu": "1wrong"}})


def test_a_method_handler_takes_its_class_arguments():
    code = (
        "class Model:\n"
        "    def __init__(self, context=None, a=1): ...\n"
        "    def fit(self, ctx, x=0): ...\n"
    )
    signature = read_signature(code, "Model::fit")
    assert signature.takes_context
    assert [p.name for p in signature.parameters] == ["x", "_init_args"]
    with pytest.raises(InvalidValueError, match="Class::method"):
        read_signature(code, "Model::predict")


def test_mlrun_errors_that_are_value_errors():
    with pytest.raises(ValueError, match="Field 'run.metadata.name' is malformed"):
        check_run_name("run(name=...)", "asd/asd")
    with pytest.raises(ValueError, match="please specify"):
        runplane.new_function("f").with_code()


def test_requirement_files_lose_their_inline_comments(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("# comment\nfaker\nchardet>=3.0.2, <4.0 # inline comment\n")
    fn = runplane.new_function("f").with_requirements(requirements_file=str(path))
    assert fn.spec.build.requirements == ["faker", "chardet>=3.0.2, <4.0"]

"""The corpus of MLRun user code (tests/compat/corpus) runs on runplane with its imports
changed and nothing else; each snippet asserts what MLRun's documentation says it produces.

The few that do not run are listed here with the reason, and must fail with runplane's error
naming it: a snippet that starts working, or fails another way, fails this test.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mlrun_corpus", ROOT / "bench" / "mlrun_corpus.py")
assert _spec is not None
assert _spec.loader is not None
corpus = importlib.util.module_from_spec(_spec)
sys.modules["mlrun_corpus"] = corpus  # its dataclasses look their module up
_spec.loader.exec_module(corpus)

#: Snippets runplane does not run, and the error each fails with.
NOT_RUNPLANE = {
    "m10_feature_store": "(the feature store) is not part of runplane",
    "p17_workflow": "workflows (Kubeflow Pipelines) is not part of runplane",
    # The documentation's example passes the file as code_to_function's name: MLRun refuses it
    # the same way.
    "r03_mpijob_replicas": "got multiple values for argument 'name'",
    "u27_schedule": "parameter for local function execution",
    # MLRun's own tests (t*): values MLRun accepts that can never work on a cluster; runplane
    # refuses them when they are given, the error saying what MLRun does and the fix
    # (docs/mlrun-compatibility.md, "Refused early").
    "t03_new_function_with_resources": "'50mi' is not valid",
    "t05_with_request_patch": "'50mi' is not valid",
    "t06_with_limits_patch": "'50mi' is not valid",
    "t07_with_limits": "'50mi' is not valid",
    "t08_default_image_pull_secret": "'my_secret' is not valid",
    "t09_override_image_pull_secret": "'another_secret' is not valid",
    "t14_to_dict_strip_exclude": "'some-path' is not valid; a mount path is absolute",
    "t15_volume_mounts_addition": "'some-path' is not valid; a mount path is absolute",
    "t20_image_pull_configuration": "'some_secret' is not valid",
}


@pytest.mark.parametrize("path", corpus.snippets(), ids=lambda path: path.stem)
def test_snippet_runs_with_only_its_imports_changed(path: Path) -> None:
    source = corpus.with_runplane(path.read_text())
    outcome = corpus.run_snippet(sys.executable, path, source, corpus.base_env(), timeout=240)
    expected = NOT_RUNPLANE.get(path.stem)
    if expected is None:
        assert outcome.ok, outcome.last_line
    else:
        assert not outcome.ok
        assert expected in outcome.last_line


def test_the_rewrite_changes_imports_only() -> None:
    source = (
        "import mlrun\nimport mlrun.feature_store as fstore\nfrom mlrun.model import RunObject\n"
        "x = 'mlrun.run'\nimport mlrunner\n"
    )
    assert corpus.with_runplane(source) == (
        "import runplane as mlrun\nimport runplane.feature_store as fstore\n"
        "from runplane.model import RunObject\nx = 'mlrun.run'\nimport mlrunner\n"
    )

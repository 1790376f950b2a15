"""The module layout MLRun code imports from: runtimes, mlconf, errors, model, execution,
the run DB; and the modules whose features runplane does not provide."""

from __future__ import annotations

import os

import pytest

import runplane as mlrun
from runplane.runtimes import kinds


def test_runtime_classes_are_function_kinds():
    job = mlrun.new_function("job", kind="job")
    serving = mlrun.new_function("serve", kind="serving")
    assert isinstance(job, mlrun.runtimes.KubejobRuntime)
    assert not isinstance(job, mlrun.runtimes.RemoteRuntime)
    assert isinstance(serving, mlrun.runtimes.RemoteRuntime)
    assert isinstance(serving, mlrun.runtimes.ServingRuntime)
    assert isinstance(job, mlrun.runtimes.BaseRuntime)
    assert mlrun.runtimes.RuntimeKinds.job == "job"
    assert isinstance(mlrun.runtimes.KubejobRuntime(metadata={"name": "made"}), mlrun.Function)
    assert isinstance(mlrun.new_function("d", kind="dask"), mlrun.runtimes.DaskCluster)
    assert isinstance(mlrun.new_function("m", kind="mpijob"), mlrun.runtimes.MpiRuntimeV1)
    assert isinstance(mlrun.new_function("s", kind="spark"), mlrun.runtimes.Spark3Runtime)
    assert set(kinds.__all__) == mlrun.runtimes.KIND_NAMES


def test_mlconf_reads_runplane_settings(monkeypatch):
    monkeypatch.setenv("RUNPLANE_FUNCTION_DEFAULTS__PREEMPTION_MODE", "allow")
    mlrun.mlconf.reload()
    assert mlrun.mlconf.function_defaults.preemption_mode == "allow"
    assert mlrun.mlconf.default_function_priority_class_name == "medium"
    assert mlrun.mlconf.valid_function_priority_class_names == "low,medium,high"
    assert mlrun.mlconf.preemptible_nodes.node_selector == {
        "app.iguazio.com/lifecycle": "preemptible"
    }
    assert mlrun.config.config.function.spec.state_thresholds.default.executing == "24h"
    with pytest.raises(AttributeError, match="has no runplane counterpart"):
        _ = mlrun.mlconf.feature_store


def test_mlconf_dbpath_points_runs_at_a_service():
    before = os.environ.pop("RUNPLANE_API", None)
    mlrun.mlconf.dbpath = "http://127.0.0.1:8470"  # mlconf writes RUNPLANE_API itself
    try:
        assert mlrun.config.current().api == "http://127.0.0.1:8470"
    finally:  # as it was, or every later test of the process would send its runs there
        if before is None:
            os.environ.pop("RUNPLANE_API", None)
        else:
            os.environ["RUNPLANE_API"] = before
        mlrun.mlconf.reload()
    assert mlrun.config.current().api != "http://127.0.0.1:8470"


def test_error_names_catch_runplane_errors():
    with pytest.raises(mlrun.errors.MLRunNotFoundError):
        mlrun.import_function("missing.yaml")
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="metadata.name"):
        mlrun.new_function("bad.name")
    with pytest.raises(mlrun.errors.MLRunBaseError, match="my own message"):
        raise mlrun.errors.MLRunInvalidArgumentError("my own message")


def test_model_and_execution_names():
    task = mlrun.model.new_task("t", params={"a": 1})
    assert isinstance(task, mlrun.model.RunTemplate)
    assert task.to_dict()["spec"]["parameters"] == {"a": 1}
    assert mlrun.execution.MLClientCtx is mlrun.MLClientCtx


def test_run_db_lists_runs_as_mlrun_does():
    db = mlrun.get_run_db()
    assert db.list_runs() == []
    assert db.list_runs().to_df().empty
    assert db.list_runs(state="executing") == []


@pytest.mark.parametrize("module", ["feature_store", "model_monitoring", "alerts", "datastore"])
def test_out_of_scope_modules_say_so(module):
    with pytest.raises(mlrun.errors.OutOfScopeError, match="is not part of runplane"):
        getattr(mlrun, module).anything()

"""The pure parts of MLRun compatibility: code annotations and definitions, parameter sets,
selectors and stop conditions, task data, settings under MLRun's names."""

from __future__ import annotations

import pytest

import runplane
from runplane.client import hyper
from runplane.errors import ArgumentError, InvalidValueError, OutOfScopeError
from runplane.spec.annotations import definitions, has_markers, kept_cells, select_code
from runplane.spec.task import HyperParamOptions, RunTemplate, new_task


def test_sections_by_name_then_unnamed():
    code = (
        "a = 1\n# mlrun: start-code\nb = 2\n# mlrun: end-code\n"
        "# runplane: start-code mine\nc = 3\n# runplane: end-code mine\n"
    )
    assert has_markers(code)
    assert select_code(code, "mine") == "c = 3\n"
    assert select_code(code, "other") == "b = 2\n"
    assert select_code("x = 1\n# mlrun: start-code\ny = 2\n") == "y = 2\n"  # to the end
    assert select_code("x = 1\n# mlrun: end-code\ny = 2\n") == "x = 1\n"  # from the start
    assert select_code("x = 1\ny = 2  # mlrun: ignore\n") == "x = 1\n"
    assert kept_cells(["# mlrun: ignore\nx = 1", "y = 2"]) == ["y = 2"]
    assert not has_markers("x = 1  # a comment\n")


def test_definitions_leave_out_what_a_script_does():
    source = (
        "import os\nfrom pathlib import Path\nRATE = 0.1\nNAMES = ['a']\n"
        "data = open('x').read()\nfn = make()\nfn.run()\n"
        "@decorate\ndef train(context):\n    return RATE\n\nclass Model:\n    pass\n"
    )
    kept = definitions(source)
    assert "fn.run()" not in kept
    assert "open('x')" not in kept
    assert "@decorate\ndef train(context):" in kept
    assert "RATE = 0.1" in kept
    assert "class Model" in kept
    with pytest.raises(InvalidValueError, match="valid Python"):
        definitions("def (")


def test_parameter_sets_by_strategy(tmp_path):
    values = {"p1": [1, 2], "p2": [10, 20]}
    grid = hyper.parameter_sets(values, HyperParamOptions())
    assert grid == [
        {"p1": 1, "p2": 10},
        {"p1": 1, "p2": 20},
        {"p1": 2, "p2": 10},
        {"p1": 2, "p2": 20},
    ]
    assert hyper.parameter_sets(values, HyperParamOptions(strategy="list")) == [
        {"p1": 1, "p2": 10},
        {"p1": 2, "p2": 20},
    ]
    sampled = hyper.parameter_sets(values, HyperParamOptions(strategy="random", max_iterations=5))
    assert len(sampled) == 5
    assert all(row["p1"] in (1, 2) for row in sampled)
    with pytest.raises(InvalidValueError, match="lists of one length"):
        hyper.parameter_sets({"p1": [1], "p2": [1, 2]}, HyperParamOptions(strategy="list"))
    with pytest.raises(InvalidValueError, match="get_child_context"):
        hyper.parameter_sets(values, HyperParamOptions(strategy="custom"))
    as_json = tmp_path / "sets.json"
    as_json.write_text('[{"p1": 1}, {"p1": 2}]')
    assert hyper.parameter_sets({}, HyperParamOptions(param_file=str(as_json))) == [
        {"p1": 1},
        {"p1": 2},
    ]
    as_csv = tmp_path / "sets.csv"
    as_csv.write_text("p1,name\n1.5,a\ntrue,b\n")
    assert hyper.parameter_sets({}, HyperParamOptions(param_file=str(as_csv))) == [
        {"p1": 1.5, "name": "a"},
        {"p1": True, "name": "b"},
    ]


def test_selectors_and_stop_conditions():
    assert hyper.selector_of("max.accuracy") == ("max", "accuracy")
    assert hyper.selector_of("min.loss") == ("min", "loss")
    assert hyper.selector_of("r1") == ("max", "r1")
    assert hyper.selector_of(None) is None
    with pytest.raises(InvalidValueError, match=r"\[max.\|min.\]<result>"):
        hyper.selector_of("best.accuracy")
    stop = hyper.condition_of("accuracy >= 0.9 and not failed or loss < -1")
    assert stop is not None
    assert stop({"accuracy": 0.95, "failed": False})
    assert not stop({"accuracy": 0.5, "loss": 0})
    assert stop({"loss": -2})
    assert not stop({})  # a missing result never stops the search
    with pytest.raises(InvalidValueError, match="comparisons of result names"):
        hyper.condition_of("__import__('os').system('x')")
    with pytest.raises(InvalidValueError, match="a comparison of results"):
        hyper.condition_of("accuracy >=")


def test_tasks_round_trip_and_refuse_bad_options():
    task = new_task("t", params={"a": 1}, inputs={"data": "d.csv"}, returns=["x"])
    task.with_hyper_params({"p": [1, 2]}, selector="max.x", parallel_runs=2)
    again = RunTemplate.from_dict(task.to_dict())
    assert again.spec.hyperparams == {"p": [1, 2]}
    assert again.spec.hyper_param_options.parallel_runs == 2
    assert again.metadata.name == "t"
    with pytest.raises(InvalidValueError, match="options are"):
        task.with_hyper_params({"p": [1]}, max_runs=3)
    with pytest.raises(InvalidValueError, match="non-empty lists"):
        task.with_hyper_params({"p": []})
    with pytest.raises(InvalidValueError, match="parallel_runs"):
        HyperParamOptions(dask_cluster_uri="db://p/dask")
    with pytest.raises(InvalidValueError, match="at least 1"):
        HyperParamOptions(parallel_runs=0)
    with pytest.raises(InvalidValueError, match="project.set_secrets"):
        new_task(secrets={"A": "b"})


def test_argument_errors_share_mlruns_name():
    assert issubclass(InvalidValueError, runplane.errors.MLRunInvalidArgumentError)
    assert issubclass(runplane.errors.ConflictError, ArgumentError)
    assert str(runplane.errors.MLRunInvalidArgumentError("plain message")) == "plain message"
    assert str(OutOfScopeError("alerts", "why")) == "alerts is not part of runplane: why"


def test_settings_view_names(monkeypatch):
    view = runplane.mlconf
    assert "default_function_priority_class_name" in dir(view)
    assert view.to_dict()["namespace"] == "runplane"
    assert view.get_preemptible_node_selector() == {"app.iguazio.com/lifecycle": "preemptible"}
    assert view.default_function_pod_resources.requests["gpu"] is None
    assert not view.is_running_on_iguazio()
    with pytest.raises(InvalidValueError, match="mlconf sets"):
        view.igz_version = "3.5"
    monkeypatch.setenv("RUNPLANE_FUNCTION_DEFAULTS__PRIORITY_CLASS", "low")
    view.reload()
    assert view.default_function_priority_class_name == "low"
    view.default_function_priority_class_name = "high"
    assert runplane.config.current().function_defaults.priority_class == "high"

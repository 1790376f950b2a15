"""Running functions as MLRun's "Running a task" and "Hyperparameter tuning" pages show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import runplane as mlrun
from tests.compat import handlers


def test_run_returns_a_run_object_with_uid_state_outputs_and_output():
    run = mlrun.new_function().run(handler=handlers.my_job, params={"p1": 5})
    assert isinstance(run, mlrun.model.RunObject)
    assert re.fullmatch(r"[0-9a-f]{32}", run.uid())
    assert run.state() == "completed"
    assert run.status.state == "completed"
    assert run.outputs["accuracy"] == 10
    assert run.output("loss") == 15
    assert run.output("missing") is None
    assert Path(run.outputs["model"]).read_bytes() == b"abc is 123"  # artifacts by path
    assert Path(run.output("html_result")).name == "html_result.html"
    assert run.artifact("mydf").as_df()["age"].tolist() == [42, 52, 36, 24, 73]
    assert run.artifact("nothing") is None
    assert run.metadata.name == "my-job"  # named after the handler, as a name
    assert run.spec.parameters == {"p1": 5}
    assert "Params: p1=5, p2=x" in run.logs()


def test_returned_value_is_logged_as_return():
    fn = mlrun.code_to_function("tasks", filename=handlers.__file__, kind="job")
    run = fn.run(handler="reads_frame", inputs={"df": _csv()}, local=True)
    assert run.outputs["return"] == 3


def test_returns_log_hints_name_results_and_datasets():
    fn = mlrun.code_to_function("tasks", filename=handlers.__file__, kind="job")
    run = fn.run(
        handler="processes",
        inputs={"df: pandas.DataFrame": _csv()},
        returns=["processed_data: dataset", "sum"],
        local=True,
    )
    assert run.state() == "completed", run.status.status_text
    assert run.outputs["sum"] == 6
    assert run.artifact("processed_data").as_df()["total"].tolist() == [11, 22, 33]


def test_context_reads_parameters_it_was_not_declared_with():
    fn = mlrun.code_to_function("params", filename=handlers.__file__, handler="reads_params")
    run = fn.run(params={"p1": 7})
    assert run.outputs == {"p1": 7, "p2": "a-string"}
    assert 'read the parameters {"p1": 7, "p2": "a-string"}' in run.logs()
    assert "not shown at the default level" not in run.logs()


def test_inputs_arrive_as_data_items():
    data = _csv()
    run = mlrun.new_function().run(handler=handlers.reads_input, inputs={"data": data})
    assert run.outputs["rows"] == 3
    assert run.outputs["local"] == data


def test_a_failing_run_reports_error_and_wait_for_completion_raises():
    run = mlrun.new_function().run(handler=handlers.fails)
    assert run.state() == "error"
    assert run.error == "ValueError: bad data in row 7"
    with pytest.raises(mlrun.errors.MLRunRuntimeError, match="bad data in row 7"):
        run.wait_for_completion()
    assert run.wait_for_completion(raise_on_failure=False) == "error"


def test_show_and_to_dict_describe_the_run(capsys):
    run = mlrun.new_function().run(handler=handlers.my_job, params={"p1": 2}, watch=False)
    assert run.wait_for_completion() == "completed"
    run.show()
    shown = capsys.readouterr().out
    assert "completed" in shown
    assert "accuracy = 4" in shown
    assert run.to_dict()["status"]["results"]["accuracy"] == 4
    assert mlrun.get_run_db().read_run(run.uid())["status"]["state"] == "completed"


def test_grid_search_runs_a_child_per_combination_and_selects_the_best():
    grid_params = {"p1": [2, 4, 1], "p2": [10, 20]}
    task = mlrun.new_task("grid-demo").with_hyper_params(grid_params, selector="max.multiplier")
    run = mlrun.new_function().run(task, handler=handlers.hyper_func)
    assert run.state() == "completed"
    assert run.outputs["multiplier"] == 80
    assert run.outputs["best_iteration"] == 4  # p1=4, p2=20 in the grid's order
    table = run.artifact("iteration_results").as_df()
    assert len(table) == 6
    assert sorted(table["output.multiplier"]) == [10, 20, 20, 40, 40, 80]
    children = mlrun.get_run_db().list_runs(name="grid-demo")
    assert len(children) == 7  # six children and the parent


def test_random_search_samples_max_iterations():
    task = mlrun.new_task("random-demo")
    task.with_hyper_params(
        {"p1": [2, 4, 1, 3], "p2": [10, 20, 30]},
        selector="max.multiplier",
        strategy="random",
        max_iterations=4,
    )
    run = mlrun.new_function().run(task, handler=handlers.hyper_func)
    assert len(run.artifact("iteration_results").as_df()) == 4
    assert run.outputs["multiplier"] == max(
        run.artifact("iteration_results").as_df()["output.multiplier"]
    )


def test_list_search_stops_on_the_stop_condition():
    task = mlrun.new_task("list-demo").with_hyper_params(
        {"p1": [2, 3, 7, 4, 5], "p2": [15, 10, 10, 20, 30]},
        selector="max.multiplier",
        strategy="list",
        stop_condition="multiplier>=70",
    )
    run = mlrun.new_function().run(task, handler=handlers.hyper_func)
    table = run.artifact("iteration_results").as_df()
    assert table["output.multiplier"].tolist() == [30, 30, 70]  # stopped at the third
    assert run.outputs["multiplier"] == 70


def test_custom_iterator_with_child_contexts():
    param_list = [{"p1": 2, "p2": 10}, {"p1": 3, "p2": 30}, {"p1": 4, "p2": 7}]
    run = mlrun.new_function().run(
        handler=handlers.custom_iterator, params={"param_list": param_list}
    )
    assert run.outputs["avg_multiplier"] == pytest.approx((20 + 90 + 28) / 3)
    assert run.outputs["multiplier"] == 90
    assert run.outputs["best_iteration"] == 2
    assert len(run.artifact("iteration_results").as_df()) == 3


def test_hyper_params_from_a_csv_param_file(tmp_path):
    params = tmp_path / "params.csv"
    params.write_text("p1,p2\n1,10\n5,3\n2,2\n")
    task = mlrun.new_task("file-demo").with_param_file(str(params), selector="min.multiplier")
    run = mlrun.new_function().run(task, handler=handlers.hyper_func)
    assert run.outputs["multiplier"] == 4
    assert run.outputs["best_iteration"] == 3


def test_hyperparams_and_selector_as_run_arguments():
    run = mlrun.new_function().run(
        handler=handlers.hyper_func,
        hyperparams={"p1": [1, 2], "p2": [3]},
        hyper_param_options=mlrun.model.HyperParamOptions(selector="max.multiplier"),
    )
    assert run.outputs["multiplier"] == 6


def test_bad_hyper_param_options_are_refused_at_the_call():
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="strategies are grid"):
        mlrun.model.HyperParamOptions(strategy="bayes")
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="strategy='random'"):
        mlrun.new_task().with_hyper_params({"p": [1]}, max_iterations=3)


def test_local_true_runs_here_even_when_a_service_is_configured(monkeypatch):
    monkeypatch.setenv("RUNPLANE_API", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("RUNPLANE_TOKEN", "x" * 32)
    mlrun.config.config.reload()
    run = mlrun.new_function().run(handler=handlers.my_job, local=True)
    assert run.state() == "completed"


def test_executing_is_accepted_for_running():
    fn = mlrun.new_function()
    fn.set_state_thresholds({"executing": "1h"})
    assert fn.spec.state_thresholds == {"running": "1h"}  # runplane's name of the state
    assert mlrun.get_run_db().list_runs(state="executing") == []


def test_out_of_scope_data_stores_are_named():
    with pytest.raises(mlrun.errors.OutOfScopeError, match="the s3:// data store"):
        mlrun.new_function().run(handler=handlers.reads_input, inputs={"data": "s3://b/k.csv"})


def _csv() -> str:
    path = Path("data.csv").resolve()
    path.write_text("a,b\n1,10\n2,20\n3,30\n")
    return str(path)


def test_runplanes_own_positional_params_and_inputs_still_work():
    fn = mlrun.code_to_function("inputs", filename=handlers.__file__, handler="reads_input")
    run = fn.run({}, {"data": _csv()})  # runplane's run(params, inputs)
    assert run.outputs["rows"] == 3
    assert fn.deploy() is True  # a job is ready as it is: no image to build


def test_retry_as_a_dict_tries_a_failed_run_again():
    # MLRun's "Function of type job" page: retry={"count": N, "backoff": {"base_delay": ...}}.
    fn = mlrun.new_function("flaky")
    run = fn.run(
        handler=handlers.fails_first_attempt,
        retry={"count": 2, "backoff": {"base_delay": "0s"}},
    )
    assert run.state() == "completed", run.status.status_text
    assert run.outputs["attempt"] == 2
    assert fn.spec.retry is None  # the caller's function is left as it was


def test_retry_as_mlruns_objects():
    from runplane.model import Retry, RetryBackoff

    retry = Retry(count=1, backoff=RetryBackoff(base_delay="0s"))
    run = mlrun.new_function("flaky").run(handler=handlers.fails_first_attempt, retry=retry)
    assert run.outputs["attempt"] == 2


def test_retry_as_a_number_and_none_at_all():
    fn = mlrun.new_function("flaky")
    assert fn.run(handler=handlers.fails_first_attempt, retry=0).state() == "error"
    assert fn.run(handler=handlers.fails_first_attempt).state() == "error"
    run = mlrun.run_function(fn, handler=handlers.fails_first_attempt, retry=1)
    assert run.outputs["attempt"] == 2


@pytest.mark.parametrize(
    ("retry", "field"),
    [
        ({"count": -1}, "retry.count"),
        ({"count": "3"}, "retry.count"),
        ({"count": 2, "backof": {"base_delay": "1s"}}, "retry.backof"),
        ({"count": 2, "backoff": {"base_delay": "soon"}}, "retry.backoff.base_delay"),
        ({"count": 2, "backoff": {"max_delay": "1s"}}, "retry.backoff.max_delay"),
        ("3", "retry"),
        (True, "retry"),
        (1000, "retry.count"),
    ],
)
def test_invalid_retry_is_refused_naming_the_field(retry, field):
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError) as refused:
        mlrun.new_function("flaky").run(handler=handlers.fails_first_attempt, retry=retry)
    assert str(refused.value).startswith(field), str(refused.value)

"""The run context as MLRun's "MLRun execution context" page describes it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import runplane as mlrun
from tests.compat import handlers


def test_context_outside_a_run(private_home):
    context = mlrun.get_or_create_ctx("train")
    assert isinstance(context, mlrun.MLClientCtx)
    assert context.get_param("p1", 1) == 1
    assert context.parameters == {"p1": 1}  # the default is recorded
    context.log_result("accuracy", context.get_param("p1", 1) * 2)
    assert context.results == {"accuracy": 2}
    path = context.log_artifact("notes", body="hello", local_path="notes.txt")
    assert Path(path).read_text() == "hello"
    assert Path(path).is_relative_to(private_home / "contexts" / context.uid)
    assert mlrun.get_or_create_ctx("other") is context  # one context per process


def test_a_script_reads_its_context_with_get_or_create_ctx(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""
        import runplane as mlrun

        if __name__ == "__main__":
            context = mlrun.get_or_create_ctx("train")
            p1 = context.get_param("p1", 1)
            p2 = context.get_param("p2", "a-string")
            context.log_result("accuracy", p1 * 2)
            context.log_result("p2", p2)
        """)
    )
    fn = mlrun.new_function("train", command=str(script))
    run = fn.run(params={"p1": 5})
    assert run.state() == "completed", run.status.status_text
    assert run.outputs == {"accuracy": 10, "p2": "a-string"}


def test_logged_results_labels_artifacts_and_dataset():
    run = mlrun.new_function().run(handler=handlers.my_job, params={"p1": 3})
    assert run.outputs["accuracy"] == 6
    keys = {a["key"] for a in run.status.artifacts}
    assert keys == {"model", "html_result", "mydf"}
    assert Path(run.output("mydf")).suffix == ".csv"


def test_log_model_keeps_the_file_with_its_spec():
    run = mlrun.new_function().run(handler=handlers.model_logger)
    assert run.state() == "completed", run.status.status_text
    model = Path(run.output("model"))
    assert model.read_bytes() == b"weights"
    spec = json.loads((model.parent / "model_spec.json").read_text())
    assert spec["framework"] == "sklearn"
    assert spec["metrics"] == {"accuracy": 0.9}
    assert spec["labels"] == {"team": "a"}
    assert run.outputs["subpath"].endswith("/artifacts/plots/roc.png")


def test_logger_takes_mlrun_keyword_fields_and_levels(capsys):
    context = mlrun.get_or_create_ctx("log")
    context.logger.info("Something happened", rows=3)
    context.logger.debug(message="Debugging info")
    context.set_logger_level("debug")
    context.logger.debug(message="now shown")
    context.logger.warning(message="Something might go wrong")
    out = capsys.readouterr().out
    assert 'Something happened {"rows": 3}' in out
    assert "Debugging info" not in out
    assert "now shown" in out
    assert "Something might go wrong" in out


def test_project_secrets_and_params_reach_the_context(tmp_path):
    project = mlrun.get_or_create_project("secrets", context=str(tmp_path / "proj"))
    project.set_secrets(secrets={"AWS_KEY": "111222333"})
    project.spec.params["label_column"] = "label"
    fn = mlrun.code_to_function("reader", filename=handlers.__file__, handler="secret_reader")
    run = project.run_function(fn)
    assert run.outputs["secret"] == "111222333"
    assert run.outputs["param"] == "label"
    assert "111222333" not in str(run.to_dict()["spec"])  # referenced, never copied


def test_out_of_scope_model_monitoring_is_named():
    run = mlrun.new_function().run(handler=handlers.needs_monitoring)
    assert run.state() == "error"
    assert "model monitoring (log_model training_set=) is not part of runplane" in run.error


def test_data_items(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b\n1,2\n")
    item = mlrun.get_dataitem(str(path))
    assert item.local() == str(path)
    assert item.get() == b"a,b\n1,2\n"
    assert item.as_df()["b"].tolist() == [2]
    with pytest.raises(mlrun.errors.OutOfScopeError, match="the s3:// data store"):
        mlrun.get_dataitem("s3://bucket/key.csv")

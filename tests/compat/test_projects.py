"""Projects as MLRun's "Create, save, and use projects" and "Run, build, and deploy" pages
show them."""

from __future__ import annotations

import getpass
import textwrap
from pathlib import Path

import pytest
import yaml

import runplane as mlrun

TRAIN = """
def train(context, p1: int = 1):
    context.log_result("accuracy", p1 * 2)
    return p1
"""


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "my-project"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "train_code.py").write_text(textwrap.dedent(TRAIN))
    (folder / "src" / "training.py").write_text(textwrap.dedent(TRAIN))
    return folder


def test_get_or_create_project_creates_saves_and_loads(project_dir):
    project = mlrun.get_or_create_project("my-project", context=str(project_dir))
    assert isinstance(project, mlrun.projects.MlrunProject)
    assert project.name == "my-project"
    assert (project_dir / "project.yaml").is_file()
    assert mlrun.get_current_project() is project
    project.set_function(
        "src/train_code.py", name="trainer", kind="job", image="mlrun/mlrun", handler="train"
    )
    project.spec.params["p"] = 3
    project.save()
    saved = yaml.safe_load((project_dir / "project.yaml").read_text())
    assert saved["kind"] == "project"
    assert saved["metadata"]["name"] == "my-project"
    assert saved["spec"]["functions"][0]["name"] == "trainer"
    assert saved["spec"]["params"] == {"p": 3}
    again = mlrun.get_or_create_project("my-project", context=str(project_dir))
    assert again is not project
    assert again.get_function("trainer").spec.image == "mlrun/mlrun"
    assert again.get_param("p") == 3


def test_run_function_by_name(project_dir):
    project = mlrun.new_project("runs", context=str(project_dir))
    project.set_function("src/train_code.py", name="trainer", kind="job", handler="train")
    run = project.run_function("trainer", params={"p1": 5})
    assert run.state() == "completed"
    assert run.outputs["accuracy"] == 10
    assert run.metadata.project == "runs"
    run = mlrun.run_function("trainer", params={"p1": 2})  # the current project's
    assert run.outputs["return"] == 2
    assert len(project.list_runs(name="trainer")) == 2


def test_module_handler_from_the_project_source(project_dir):
    project = mlrun.new_project("repo", context=str(project_dir))
    project.spec.workdir = "src"
    project.set_function(name="train", handler="training.train", kind="job", with_repo=True)
    run = project.run_function("train", params={"p1": 4})
    assert run.outputs["accuracy"] == 8


def test_a_project_s_default_node_selector_is_under_its_functions_own(project_dir):
    """MLRun's ``default_function_node_selector``: every function of the project runs with it;
    a key the function sets wins, and one it sets to "" is left out."""
    from runplane.runtimes.local.node import NODE_NAME

    project = mlrun.new_project(
        "placed",
        context=str(project_dir),
        default_function_node_selector={"kubernetes.io/hostname": NODE_NAME, "zone": "a"},
    )
    fn = project.set_function("src/train_code.py", name="trainer", kind="job", handler="train")
    fn.with_node_selection(node_selector={"zone": ""})  # not zone a: anywhere
    run = project.run_function("trainer", params={"p1": 1})
    assert run.state() == "completed", run.status.status_text
    assert run.record.function["spec"]["node_selector"] == {"kubernetes.io/hostname": NODE_NAME}
    project.save()
    again = mlrun.load_project(str(project_dir))
    assert again.default_function_node_selector == {
        "kubernetes.io/hostname": NODE_NAME,
        "zone": "a",
    }
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="default_function_node"):
        again.default_function_node_selector = {"zone": "not a value!"}


def test_user_project_adds_the_user_name(project_dir):
    project = mlrun.new_project("myproj", context=str(project_dir), user_project=True)
    assert project.name == f"myproj-{getpass.getuser().lower()}"


def test_load_project_reads_project_yaml(project_dir):
    (project_dir / "project.yaml").write_text(
        textwrap.dedent("""
        kind: project
        metadata:
          name: loaded
        spec:
          params:
            label_column: label
          default_image: mlrun/mlrun
          functions:
          - url: src/train_code.py
            name: trainer
            kind: job
            handler: train
        """)
    )
    project = mlrun.load_project(str(project_dir))
    assert project.name == "loaded"
    assert project.spec.params == {"label_column": "label"}
    assert project.get_param("label_column") == "label"
    assert project.get_function("trainer").spec.handler == "train"
    run = project.run_function("trainer", params={"p1": 1}, local=True)
    assert run.outputs["accuracy"] == 2


def test_default_image_build_and_deploy_are_recorded(project_dir):
    project = mlrun.new_project("builds", context=str(project_dir))
    project.set_default_image("mlrun/mlrun")
    project.set_function(
        "src/train_code.py",
        name="trainer",
        kind="job",
        handler="train",
        requirements=["pandas==1.3.5"],
    )
    status = project.build_function(
        "trainer", base_image="myrepo/base_image:latest", commands=["mkdir -p /some/path"]
    )
    assert status.ready
    fn = project.get_function("trainer")
    assert fn.spec.build.requirements == ["pandas==1.3.5"]
    assert fn.spec.build.commands == ["mkdir -p /some/path"]
    assert fn.spec.build.base_image == "myrepo/base_image:latest"
    assert project.deploy_function("trainer").state == "ready"
    assert project.default_image == "mlrun/mlrun"
    project.export()
    assert "myrepo/base_image:latest" in (project_dir / "project.yaml").read_text()


def test_set_source_and_to_yaml(project_dir):
    project = mlrun.new_project("sourced", context=str(project_dir), save=False)
    project.set_source(source="git://github.com/mlrun/project-archive.git", pull_at_runtime=True)
    assert project.spec.source == "git://github.com/mlrun/project-archive.git"
    assert "project-archive.git" in project.to_yaml()
    assert not (project_dir / "project.yaml").exists()  # save=False


def test_workflows_are_out_of_scope(project_dir):
    project = mlrun.new_project("flows", context=str(project_dir))
    with pytest.raises(mlrun.errors.OutOfScopeError, match="workflows"):
        project.set_workflow(name="main", workflow_path="pipeline.py")


def test_get_current_project_without_one():
    assert mlrun.get_current_project(silent=True) is None
    with pytest.raises(mlrun.errors.MLRunNotFoundError, match="no current project"):
        mlrun.get_current_project()


def test_secret_keys_are_file_names(project_dir):
    project = mlrun.new_project("keys", context=str(project_dir))
    for key in ("..", "a/b"):
        with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="set_secrets key"):
            project.set_secrets({key: "x"})
    assert project.spec.secret_keys == []


def test_projects_are_recorded_on_this_machine_and_read_from_the_run_db(tmp_path):
    project = mlrun.new_project(
        "churn", context=str(tmp_path / "one"), description="churn models", parameters={"a": 1}
    )
    db = mlrun.get_run_db()
    assert db.list_projects() == ["churn"]
    stored = db.get_project("churn")
    assert isinstance(stored, mlrun.projects.MlrunProject)
    assert (stored.spec.description, stored.spec.params) == ("churn models", {"a": 1})
    assert project.owner == getpass.getuser()

    project.spec.description = "v2"
    project.set_param("b", [1, 2])
    project.save()
    assert db.get_project("churn").spec.params == {"a": 1, "b": [1, 2]}
    again = mlrun.get_or_create_project("churn", context=str(tmp_path / "two"))
    assert again.spec.description == "v2"  # begun from the record: no project.yaml there
    assert [p.name for p in db.list_projects(format_="full", labels={"x": "y"})] == []

    mlrun.new_function(project="churn").run(handler=_double, params={"x": 2})
    with pytest.raises(mlrun.errors.MLRunBaseError, match="1 runs"):
        db.delete_project("churn")
    db.delete_project("churn", deletion_strategy="cascading")
    assert db.list_projects() == ["churn"]  # its run still names it
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="deletion_strategy"):
        db.delete_project("churn", deletion_strategy="all")
    with pytest.raises(mlrun.errors.MLRunNotFoundError):
        db.get_project("nowhere")


def _double(x: int) -> int:
    return x * 2


def test_a_projects_retention_policy_is_saved_with_its_record(tmp_path):
    project = mlrun.new_project("kept", context=str(tmp_path / "one"))
    project.spec.retention = {"runs_max_count": 100, "logs_max_age": "14d"}
    project.save()
    db = mlrun.get_run_db()
    assert db.get_project("kept").spec.retention == {"runs_max_count": 100, "logs_max_age": "14d"}
    loaded = mlrun.load_project(str(tmp_path / "one"))
    assert loaded.spec.retention == {"runs_max_count": 100, "logs_max_age": "14d"}  # in yaml
    plain = mlrun.new_project("kept", context=str(tmp_path / "two"))  # sets no policy
    plain.save()
    assert db.get_project("kept").spec.retention == {"runs_max_count": 100, "logs_max_age": "14d"}
    project.spec.retention = {"runs_max_count": 0}
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="retention.runs_max_count"):
        project.save()

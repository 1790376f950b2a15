"""Functions as MLRun's "Create and use functions", "Converting notebooks to function" and
"Managing job resources" pages configure them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import runplane as mlrun


def _notebook(path: Path, cells: list[str]) -> str:
    path.write_text(
        json.dumps({"cells": [{"cell_type": "code", "source": cell} for cell in cells]})
    )
    return str(path)


def test_names_are_normalised_with_a_warning():
    with pytest.warns(UserWarning, match="using 'secret-func'"):
        fn = mlrun.new_function("secret_func", kind="job")
    assert fn.metadata.name == "secret-func"


def test_annotations_choose_the_code_of_a_notebook(tmp_path):
    notebook = _notebook(
        tmp_path / "nb.ipynb",
        [
            "# mlrun: start-code\n\ndef sub_handler():\n    return 'hello world'\n",
            "# mlrun: ignore\ndef sub_handler():\n    return 'I will be ignored!'\n",
            "def handler(context):\n    return sub_handler()\n\n# mlrun: end-code\n",
            "print('not part of the function')\n",
        ],
    )
    fn = mlrun.code_to_function(
        "some-function-name", filename=notebook, kind="job", code_output=str(tmp_path / "out")
    )
    run = fn.run(name="some-function-name", handler="handler", local=True)
    assert run.outputs["return"] == "hello world"
    assert "not part of the function" not in (tmp_path / "out" / "nb.py").read_text()


def test_named_sections_belong_to_their_function(tmp_path):
    notebook = _notebook(
        tmp_path / "multi.ipynb",
        [
            "# mlrun: start-code multi-section-function-name\n"
            "function_name = 'multi-section-function-name'\n"
            "# mlrun: end-code multi-section-function-name\n",
            "function_name = 'I will be ignored!'\n",
            "# mlrun: start-code multi-section-function-name\n"
            "def handler(context):\n    return f'hello from {function_name}'\n"
            "# mlrun: end-code multi-section-function-name\n",
        ],
    )
    fn = mlrun.code_to_function("multi-section-function-name", filename=notebook, kind="job")
    run = fn.run(handler="handler")
    assert run.outputs["return"] == "hello from multi-section-function-name"


def test_resources_read_and_written_as_a_dict():
    fn = mlrun.new_function("training", kind="job")
    fn.with_limits(mem="2G", cpu=2)
    assert fn.spec.resources["limits"]["memory"] == "2G"
    fn.spec.resources["requests"]["cpu"] = "500m"
    assert fn.spec.resources["requests"] == {"cpu": "500m"}
    limits = {"memory": "2G", "cpu": 2}
    assert dict(fn.spec.resources) == {"requests": {"cpu": "500m"}, "limits": limits}
    with pytest.raises(mlrun.errors.MLRunInvalidArgumentError, match="above the limit"):
        fn.spec.resources["requests"]["cpu"] = "3"
    assert fn.spec.resources["requests"] == {"cpu": "500m"}


def test_kubernetes_client_objects_become_dicts():
    from kubernetes import client as k8s

    fn = mlrun.new_function("placed", kind="job")
    fn.with_node_selection(
        tolerations=[k8s.V1Toleration(key="gpu", operator="Exists", effect="NoSchedule")],
        affinity=k8s.V1Affinity(
            node_affinity=k8s.V1NodeAffinity(
                required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(
                    node_selector_terms=[
                        k8s.V1NodeSelectorTerm(
                            match_expressions=[
                                k8s.V1NodeSelectorRequirement(
                                    key="zone", operator="In", values=["a"]
                                )
                            ]
                        )
                    ]
                )
            )
        ),
    )
    fn.spec.env = [k8s.V1EnvVar(name="A", value="1")]
    fn.spec.volumes = [
        k8s.V1Volume(
            name="data",
            persistent_volume_claim=k8s.V1PersistentVolumeClaimVolumeSource(claim_name="c"),
        )
    ]
    fn.spec.volume_mounts = [k8s.V1VolumeMount(name="data", mount_path="/data")]
    assert fn.spec.tolerations == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    terms = fn.spec.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "zone"
    assert fn.spec.env == [{"name": "A", "value": "1"}]
    assert fn.spec.volumes == [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    assert fn.spec.volume_mounts == [{"name": "data", "mountPath": "/data"}]
    json.dumps(fn.to_dict())  # plain data throughout


def test_build_and_serving_settings_are_kept():
    fn = mlrun.new_function("serve", kind="nuclio", image="mlrun/mlrun")
    assert fn.kind == "serving"
    fn.with_requirements(["pandas==2.2", "scikit-learn"])
    fn.set_config("spec.scaleToZero.scaleResources", [{"windowSize": "30m", "threshold": 0}])
    fn.set_image_pull_configuration(
        image_pull_policy="Always", image_pull_secret_name="registry-creds"
    )
    fn.with_source_archive("git://github.com/org/repo.git", handler="serve.handler")
    fn.spec.service_type = "NodePort"
    fn.spec.min_replicas = 0  # scale to zero
    fn.spec.max_replicas = 2
    assert fn.spec.build.requirements == ["pandas==2.2", "scikit-learn"]
    assert fn.spec.config["spec.scaleToZero.scaleResources"][0]["windowSize"] == "30m"
    rendered = mlrun.render(fn)
    deployment, service = rendered.manifests[0], rendered.manifests[1]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert pod["containers"][0]["imagePullPolicy"] == "Always"
    assert service["spec"]["type"] == "NodePort"


def test_save_and_import_from_the_db_and_from_yaml(tmp_path):
    code = tmp_path / "trainer.py"
    code.write_text("def train(context):\n    return 1\n")
    fn = mlrun.code_to_function("trainer", project="proj", filename=str(code), handler="train")
    uri = fn.save()
    assert uri == "db://proj/trainer"
    again = mlrun.import_function("db://proj/trainer")
    assert again.spec.handler == "train"
    fn.export(str(tmp_path / "function.yaml"))
    renamed = mlrun.import_function(
        str(tmp_path / "function.yaml"), new_name="copy", project="other"
    )
    assert (renamed.metadata.name, renamed.metadata.project) == ("copy", "other")
    assert mlrun.get_run_db().get_function("trainer", project="proj")["spec"]["handler"] == "train"


def test_the_function_hub_is_out_of_scope():
    with pytest.raises(mlrun.errors.OutOfScopeError, match="the MLRun function hub"):
        mlrun.import_function("hub://sklearn_classifier")


def test_seeds_job_resources_example(tmp_path):
    code = tmp_path / "training.py"
    code.write_text(
        textwrap.dedent("""
        def my_training_function(context, dataset=None):
            return 1
    """)
    )
    train_fn = mlrun.code_to_function(
        "training", filename=str(code), kind="job", handler="my_training_function"
    )
    train_fn.with_preemption_mode(mode="prevent")
    train_fn.with_priority_class(name="high")
    train_fn.with_requests(mem="64Mi", cpu="100m")
    run = train_fn.run(inputs={"dataset": str(code)})
    assert run.state() == "completed"

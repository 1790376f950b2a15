"""Every code example of the source documents, written with runplane, and what it renders.

Examples the documents print garbled (a label key lost in extraction, a positional name given
twice) are kept as written where Python can run them, and assert the clear error runplane
gives; the runnable intent of each is asserted next to it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import runplane
from runplane.config import load_settings
from runplane.errors import ConflictError, InvalidValueError, OutOfScopeError
from runplane.placement import evaluate
from runplane.rendering import render

from .cluster import reference_nodes
from .conftest import assert_valid_manifests
from .pods import theirs

LIFECYCLE = "app.iguazio.com/lifecycle"


@pytest.fixture
def func():
    return runplane.new_function("training").with_requests(mem="1G", cpu=1)


def rendered_pod(fn):
    result = render(fn, load_settings())
    assert_valid_manifests(result.manifests)
    return result.pod_spec


# -- node affinity documents (000, 001) ------------------------------------------------------


def test_on_demand_selector(func):
    func.with_node_selection(node_selector={"app.iguazio.com/lifecycle": "non-preemptible"})
    spec = rendered_pod(func)
    assert spec["nodeSelector"] == {LIFECYCLE: "non-preemptible"}
    assert set(evaluate(spec, reference_nodes()).fits) == {"on-demand-1"}


def test_spot_selector_needs_a_mode_that_permits_spot(func):
    func.with_node_selection(node_selector={"app.iguazio.com/lifecycle": "preemptible"})
    with pytest.raises(ConflictError, match="selects spot nodes, but preemption mode 'prevent'"):
        render(func, load_settings())
    func.with_preemption_mode("constrain")
    spec = rendered_pod(func)
    assert spec["nodeSelector"] == {LIFECYCLE: "preemptible"}
    assert set(evaluate(spec, reference_nodes()).fits) == {"spot-1"}


def test_selector_with_the_key_lost_in_the_document(func):
    with pytest.raises(InvalidValueError) as caught:
        func.with_node_selection(node_selector={"": "non-preemptible"})
    assert str(caught.value).startswith("spec.node_selector key: '' is not valid; a label key is")


def test_several_labels_are_anded(func):
    func.with_node_selection(node_selector={LIFECYCLE: "non-preemptible", "zone": "a"})
    assert evaluate(rendered_pod(func), reference_nodes()).fits == []


# -- configuring runs and functions (003) ----------------------------------------------------


def test_environment_variables(func, tmp_path):
    func.set_env(name="MY_ENV", value="MY_VAL")
    func.set_envs(env_vars={"MY_ENV": "MY_VAL", "SECOND_ENV": "SECOND_VAL"})
    env_file = tmp_path / "env.txt"
    env_file.write_text("THIRD_ENV=THIRD_VAL\n")
    func.set_envs(file_path=str(env_file))
    env = rendered_pod(func)["containers"][0]["env"]
    assert env[-3:] == [
        {"name": "MY_ENV", "value": "MY_VAL"},
        {"name": "SECOND_ENV", "value": "SECOND_VAL"},
        {"name": "THIRD_ENV", "value": "THIRD_VAL"},
    ]


def test_requests_and_limits(func):
    func.with_requests(mem="1G", cpu=1)
    func.with_limits(mem="2G", cpu=2, gpus=1)
    assert rendered_pod(func)["containers"][0]["resources"] == {
        "requests": {"memory": "1G", "cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"memory": "2G", "cpu": "2", "nvidia.com/gpu": "1"},
    }


def test_mpijob_example_from_the_documents(tmp_path):
    code = tmp_path / "training.py"
    code.write_text("def train(context):\n    pass\n")
    training_function = runplane.code_to_function(
        filename=str(code),
        name="training",
        handler="train",
        kind="mpijob",
        image="mlrun/ml-models-gpu",
    )
    training_function.spec.replicas = 2
    training_function.with_requests(cpu=2)
    training_function.gpus(1)
    job = runplane.render(training_function, load_settings()).manifests[0]
    assert job["kind"] == "MPIJob"
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2
    (container,) = worker["template"]["spec"]["containers"]
    assert container["image"] == "mlrun/ml-models-gpu"
    assert container["resources"] == {
        "requests": {"cpu": "2", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }


def test_workers():
    serve = runplane.new_function("serve", kind="serving").with_requests(mem="1G", cpu=1).gpus(8)
    serve.with_http(workers=8, worker_timeout=10)
    result = render(serve, load_settings())
    assert_valid_manifests(result.manifests)
    env = {e["name"]: e.get("value") for e in result.pod_spec["containers"][0]["env"]}
    assert (env["RUNPLANE_HTTP_WORKERS"], env["RUNPLANE_HTTP_WORKER_TIMEOUT"]) == ("8", "10")
    assert "gpus-differ-from-workers" not in [lint.code for lint in result.lints]


def test_scaling():
    fn = runplane.new_function("serve", kind="serving").with_requests(cpu=1, mem="1G")
    fn.spec.replicas = 2
    fn.spec.min_replicas = 1
    fn.spec.max_replicas = 4
    manifests = render(fn, load_settings()).manifests
    assert_valid_manifests(manifests)
    deployment, _, hpa, _ = manifests
    assert deployment["spec"]["replicas"] == 2
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 4)


def test_function_hub_is_refused_clearly():
    with pytest.raises(OutOfScopeError, match="the MLRun function hub .* is not part of runplane"):
        runplane.import_function("hub://sklearn_classifier")


def test_mount_v3io_with_volume_mounts(func):
    func.apply(
        runplane.mount_v3io(
            name="data",
            access_key="XYZ123..",
            volume_mounts=[runplane.VolumeMount("/data", "projects/proj1/data")],
        )
    )
    result = render(func, load_settings())
    assert_valid_manifests(result.manifests)
    assert theirs(result.pod_spec["containers"][0]["volumeMounts"]) == [
        {"name": "data", "mountPath": "/data", "subPath": "projects/proj1/data"}
    ]
    assert result.manifests[1]["kind"] == "Secret"


def test_mount_v3io_defaults():
    open_archive_function = runplane.new_function("open-archive")
    open_archive_function.apply(runplane.mount_v3io())
    spec = rendered_pod(open_archive_function)
    assert theirs(spec["volumes"]) == [
        {
            "name": "v3io",
            "flexVolume": {"driver": "v3io/fuse", "secretRef": {"name": "v3io-access"}},
        }
    ]


def test_mount_pvc(func):
    func.apply(
        runplane.platforms.mount_pvc(
            pvc_name="data-claim", volume_name="data", volume_mount_path="/data"
        )
    )
    spec = rendered_pod(func)
    assert theirs(spec["volumes"]) == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}}
    ]
    assert theirs(spec["containers"][0]["volumeMounts"]) == [{"name": "data", "mountPath": "/data"}]


def test_preemption_mode_prevent_on_the_documents_job(tmp_path):
    script = tmp_path / "notebook_like.py"
    script.write_text(
        textwrap.dedent("""
        import runplane

        def my_training_function(context, dataset=None):
            return 1

        train_fn = runplane.code_to_function('training',
                                    kind='job',
                                    handler='my_training_function')
        train_fn.with_preemption_mode(mode="prevent")
        print(train_fn.spec.build.filename, train_fn.spec.preemption_mode)
    """)
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["notebook_like.py", "prevent"]


def test_priority_classes(func):
    func.with_priority_class(name="high")
    assert rendered_pod(func)["priorityClassName"] == "high"
    func.with_priority_class(name="default-priority")
    with pytest.raises(InvalidValueError, match="valid priority classes are low, medium, high"):
        render(func, load_settings())


def test_state_thresholds(func):
    func.set_state_thresholds({"pending_not_scheduled": "1 min"})
    assert func.spec.state_thresholds == {"pending_not_scheduled": "1 min"}
    from runplane.spec.thresholds import check_thresholds, threshold_seconds

    per_run = check_thresholds(
        "run(state_thresholds=...)", {"running": "1 min", "image_pull_backoff": "1 minute and 30s"}
    )
    assert threshold_seconds(per_run) == {"running": 60, "image_pull_backoff": 90}

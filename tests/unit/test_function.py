"""Every Function call: its effect, its errors (messages asserted), and no partial state."""

from __future__ import annotations

import pytest

import runplane
from runplane.errors import ConflictError, InvalidValueError, NotFoundError, OutOfScopeError
from runplane.spec import Function, FunctionKind


@pytest.fixture
def fn() -> Function:
    return runplane.new_function("training")


def test_modifiers_chain_and_return_the_function(fn):
    assert fn.with_requests(cpu=1).with_limits(cpu=2).set_env("A", "1") is fn


def test_with_requests_replaces_unless_patch(fn):
    fn.with_requests(mem="1G", cpu=1)
    assert fn.spec.resources.requests == {"memory": "1G", "cpu": 1}
    fn.with_requests(cpu="500m")
    assert fn.spec.resources.requests == {"cpu": "500m"}
    fn.with_requests(mem="2Gi", patch=True)
    assert fn.spec.resources.requests == {"cpu": "500m", "memory": "2Gi"}


def test_with_limits_replaces_unless_patch_and_keeps_gpus_as_limits(fn):
    fn.with_limits(mem="2G", cpu=2, gpus=1)
    assert fn.spec.resources.limits == {"memory": "2G", "cpu": 2, "nvidia.com/gpu": 1}
    fn.with_limits(cpu=4)
    assert fn.spec.resources.limits == {"cpu": 4}
    fn.with_limits(mem="8G", patch=True)
    assert fn.spec.resources.limits == {"cpu": 4, "memory": "8G"}


def test_gpus_and_gpu_type(fn):
    fn.with_limits(cpu=2, mem="4G").gpus(2)
    assert fn.spec.resources.limits == {"cpu": 2, "memory": "4G", "nvidia.com/gpu": 2}
    fn.with_limits(gpus=1, gpu_type="amd.com/gpu", patch=True)
    assert fn.spec.resources.limits == {"cpu": 2, "memory": "4G", "amd.com/gpu": 1}
    assert fn.gpu_count == 1


def test_request_above_limit_is_refused_and_nothing_changes(fn):
    fn.with_requests(mem="1G").with_limits(mem="2G")
    with pytest.raises(ConflictError) as caught:
        fn.with_requests(mem="3G")
    assert str(caught.value) == (
        "resources.requests.memory: request '3G' is above the limit '2G'; a request must be at "
        "most its limit (example: with_requests(mem='2G'))"
    )
    assert fn.spec.resources.requests == {"memory": "1G"}
    with pytest.raises(ConflictError, match="request '1G' is above the limit '512Mi'"):
        fn.with_limits(mem="512Mi")
    assert fn.spec.resources.limits == {"memory": "2G"}


def test_cpu_request_above_limit_compares_normalised_values(fn):
    fn.with_limits(cpu="1")
    fn.with_requests(cpu="1000m")  # equal after normalisation
    with pytest.raises(ConflictError, match="request '1001m' is above the limit '1'"):
        fn.with_requests(cpu="1001m")


@pytest.mark.parametrize(
    "gpus",
    [1.5, -1, "two", True, 4097, 10**40, 10**5000, "9" * 5000],
    ids=["fraction", "negative", "word", "bool", "4097", "40-digits", "5001-digits", "text"],
)
def test_gpus_must_be_a_whole_number_within_bounds(fn, gpus):
    with pytest.raises(InvalidValueError) as caught:
        fn.with_limits(gpus=gpus)
    message = str(caught.value)
    assert "GPUs are a whole number from 0 to 4096 (example: gpus=1)" in message
    assert len(message) < 300  # a huge number is described, never written out
    assert fn.spec.resources.limits == {}


def test_bad_gpu_type(fn):
    with pytest.raises(InvalidValueError, match="a GPU type is a domain-qualified"):
        fn.gpus(1, gpu_type="gpu")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda f: f.with_requests(mem="1g"), "with_requests(mem=...): '1g' is not valid"),
        (lambda f: f.with_requests(cpu="1.5.5"), "with_requests(cpu=...): '1.5.5' is not valid"),
        (lambda f: f.with_limits(cpu=-1), "with_limits(cpu=...): -1 is not valid"),
        (lambda f: f.with_limits(mem=""), "with_limits(mem=...): '' is not valid"),
    ],
)
def test_bad_quantities_at_the_call(fn, call, message):
    with pytest.raises(InvalidValueError) as caught:
        call(fn)
    assert str(caught.value).startswith(message)
    assert fn.spec.resources.requests == {}
    assert fn.spec.resources.limits == {}


def test_node_selection_parts_replace_independently(fn):
    toleration = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    fn.with_node_selection(node_selector={"a": "1", "b": "2"}, tolerations=[toleration])
    fn.with_node_selection(node_name="node-7")
    assert fn.spec.node_selector == {"a": "1", "b": "2"}
    assert fn.spec.tolerations == [toleration]
    assert fn.spec.node_name == "node-7"
    fn.with_node_selection(node_selector={})
    assert fn.spec.node_selector == {}


def test_node_selection_accepts_kubernetes_client_objects(fn):
    class V1Toleration:  # the shape of the official client's models
        attribute_map = {
            "key": "key",
            "operator": "operator",
            "value": "value",
            "effect": "effect",
            "toleration_seconds": "tolerationSeconds",
        }

        def __init__(self):
            self.key, self.operator, self.value = "gpu", "Exists", None
            self.effect, self.toleration_seconds = "NoSchedule", None

    fn.with_node_selection(tolerations=[V1Toleration()])
    assert fn.spec.tolerations == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"node_selector": {"": "non-preemptible"}}, "spec.node_selector key: '' is not valid"),
        ({"node_selector": {"app": "bad value"}}, "spec.node_selector['app']: 'bad value'"),
        (
            {"tolerations": [{"key": "a", "operator": "Maybe"}]},
            "allowed operators are Equal and Exists",
        ),
        ({"tolerations": [{"key": "a", "effect": "Sometimes"}]}, "allowed effects are NoSchedule"),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "z", "operator": "Near", "values": ["a"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            "allowed operators are In, NotIn, Exists, DoesNotExist, Gt, Lt",
        ),
        ({"affinity": {"node_affinity": {}}}, "an affinity has nodeAffinity"),
        ({"node_name": "Node_1"}, "spec.node_name: 'Node_1' is not valid"),
    ],
)
def test_bad_node_selection(fn, kwargs, message):
    fn.with_node_selection(node_selector={"keep": "me"})
    with pytest.raises(InvalidValueError) as caught:
        fn.with_node_selection(**kwargs)
    assert message in str(caught.value)
    assert fn.spec.node_selector == {"keep": "me"}


def test_preemption_mode(fn):
    assert fn.with_preemption_mode("constrain").spec.preemption_mode == "constrain"
    assert fn.with_preemption_mode("Allow").spec.preemption_mode == "allow"
    with pytest.raises(InvalidValueError) as caught:
        fn.with_preemption_mode("sometimes")
    assert str(caught.value) == (
        "mode: 'sometimes' is not valid; allowed modes are none, prevent, constrain, allow "
        "(example: with_preemption_mode(mode='prevent'))"
    )
    assert fn.spec.preemption_mode == "allow"


def test_priority_class_name_syntax_at_call(fn):
    assert fn.with_priority_class(name="high").spec.priority_class_name == "high"
    assert fn.with_priority_class().spec.priority_class_name is None
    with pytest.raises(InvalidValueError, match="with_priority_class"):
        fn.with_priority_class(name="High Priority")


def test_set_env_replaces_same_name(fn):
    fn.set_env(name="MY_ENV", value="MY_VAL").set_env("OTHER", 3).set_env("MY_ENV", "NEW")
    assert fn.spec.env == [{"name": "MY_ENV", "value": "NEW"}, {"name": "OTHER", "value": "3"}]


def test_set_envs_from_dict_and_file(fn, tmp_path):
    fn.set_envs(env_vars={"MY_ENV": "MY_VAL", "SECOND_ENV": "SECOND_VAL"})
    env_file = tmp_path / "env.txt"
    env_file.write_text("# comment\nTHIRD=3\nSECOND_ENV='quoted value'\n\nexport FOURTH=4\n")
    fn.set_envs(file_path=str(env_file))
    assert fn.spec.env == [
        {"name": "MY_ENV", "value": "MY_VAL"},
        {"name": "SECOND_ENV", "value": "quoted value"},
        {"name": "THIRD", "value": "3"},
        {"name": "FOURTH", "value": "4"},
    ]


def test_set_envs_needs_exactly_one_source(fn, tmp_path):
    for kwargs in ({}, {"env_vars": {"A": "1"}, "file_path": str(tmp_path / "x")}):
        with pytest.raises(InvalidValueError, match="give exactly one of env_vars and file_path"):
            fn.set_envs(**kwargs)


def test_set_envs_missing_file(fn, tmp_path):
    with pytest.raises(NotFoundError, match="env file .*nope.env does not exist"):
        fn.set_envs(file_path=tmp_path / "nope.env")


def test_set_envs_bad_line_names_the_line_and_sets_nothing(fn, tmp_path):
    env_file = tmp_path / "env.txt"
    env_file.write_text("GOOD=1\nthis is not a variable\nLATER=2\n")
    with pytest.raises(InvalidValueError) as caught:
        fn.set_envs(file_path=env_file)
    assert str(caught.value).startswith(f"{env_file}:2: 'this is not a variable' is not valid")
    assert fn.spec.env == []


def test_set_env_from_secret_references_and_never_copies(fn):
    fn.set_env_from_secret("DB_PASSWORD", secret="db-credentials", secret_key="password")
    assert fn.spec.env == [
        {
            "name": "DB_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": "db-credentials", "key": "password"}},
        }
    ]


def test_bad_env_names_and_values(fn):
    with pytest.raises(InvalidValueError, match="printable ASCII without '='"):
        fn.set_env("A=B", "1")
    with pytest.raises(InvalidValueError, match="a value is a string, number or boolean"):
        fn.set_env("A", None)


def test_mount_pvc_configmap_secret(fn):
    fn.apply(
        runplane.mount_pvc(pvc_name="data-claim", volume_name="data", volume_mount_path="/data")
    )
    fn.apply(runplane.mount_configmap("app-config", "/etc/app", volume_name="config"))
    fn.apply(runplane.mount_secret("tls", "/etc/tls", items={"tls.crt": "cert.pem"}))
    assert fn.spec.volumes == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-claim"}},
        {"name": "config", "configMap": {"name": "app-config"}},
        {
            "name": "secret",
            "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "cert.pem"}]},
        },
    ]
    assert [m["mountPath"] for m in fn.spec.volume_mounts] == ["/data", "/etc/app", "/etc/tls"]


def test_reapplying_the_same_mount_is_a_no_op(fn):
    mount = runplane.mount_pvc(pvc_name="data-claim", volume_name="data", volume_mount_path="/data")
    fn.apply(mount).apply(mount)
    assert len(fn.spec.volumes) == 1
    assert len(fn.spec.volume_mounts) == 1


def test_duplicate_volume_names_and_paths_are_refused(fn):
    fn.apply(runplane.mount_pvc("data-claim", "data", "/data"))
    with pytest.raises(ConflictError, match="a different volume is already named 'data'"):
        fn.apply(runplane.mount_pvc("other-claim", "data", "/other"))
    with pytest.raises(ConflictError, match="'/data' is already a mount path .of volume 'data'."):
        fn.apply(runplane.mount_pvc("other-claim", "other", "/data/"))
    assert len(fn.spec.volumes) == 1


def test_mount_v3io_keeps_the_access_key_out_of_the_spec(fn):
    fn.apply(
        runplane.mount_v3io(
            name="data",
            access_key="XYZ123..",
            volume_mounts=[runplane.VolumeMount("/data", "projects/proj1/data")],
        )
    )
    assert fn.spec.volumes == [
        {
            "name": "data",
            "flexVolume": {"driver": "v3io/fuse", "secretRef": {"name": "training-data-v3io"}},
        }
    ]
    assert fn.spec.volume_mounts == [
        {"name": "data", "mountPath": "/data", "subPath": "projects/proj1/data"}
    ]
    assert "XYZ123" not in fn.to_yaml()
    assert fn.held_secrets == {"training-data-v3io": {"accessKey": "XYZ123.."}}


def test_mount_v3io_defaults_and_named_secret(fn):
    fn.apply(runplane.mount_v3io(user="admin", secret="my-v3io"))
    assert fn.spec.volumes[0]["flexVolume"]["secretRef"] == {"name": "my-v3io"}
    assert fn.spec.volume_mounts == [
        {"name": "v3io", "mountPath": "/v3io"},
        {"name": "v3io", "mountPath": "/User", "subPath": "users/admin"},
    ]
    assert fn.held_secrets == {}


def test_bad_mounts():
    with pytest.raises(InvalidValueError, match="a mount path is absolute"):
        runplane.mount_pvc("claim", "data", "data")
    with pytest.raises(InvalidValueError, match="pvc_name: 'Bad_Claim'"):
        runplane.mount_pvc("Bad_Claim")
    with pytest.raises(ConflictError, match="either access_key or secret"):
        runplane.mount_v3io(access_key="k", secret="s")
    with pytest.raises(InvalidValueError, match="apply takes a modifier"):
        runplane.new_function("x").apply("mount")


def test_state_thresholds_patch_alias_and_replace(fn):
    fn.set_state_thresholds({"pending_not_scheduled": "1 min"})
    fn.set_state_thresholds({"executing": "2h"})
    assert fn.spec.state_thresholds == {"pending_not_scheduled": "1 min", "running": "2h"}
    fn.set_state_thresholds({"image_pull_backoff": "1 minute and 30s"}, patch=False)
    assert fn.spec.state_thresholds == {"image_pull_backoff": "1 minute and 30s"}


def test_bad_state_thresholds(fn):
    with pytest.raises(InvalidValueError) as caught:
        fn.set_state_thresholds({"stuck": "1h"})
    assert str(caught.value) == (
        "set_state_thresholds state: 'stuck' is not valid; allowed states are pending_scheduled, "
        "pending_not_scheduled, image_pull_backoff, running, executing "
        "(example: {'running': '1 min'})"
    )
    with pytest.raises(InvalidValueError, match=r"set_state_thresholds\['running'\]: 'a while'"):
        fn.set_state_thresholds({"running": "a while"})
    assert fn.spec.state_thresholds == {}


def test_thresholds_do_not_apply_to_serving():
    serve = runplane.new_function("serve", kind="serving")
    with pytest.raises(ConflictError, match="state thresholds do not apply to serving functions"):
        serve.set_state_thresholds({"running": "1h"})
    assert serve.spec.state_thresholds == {}


def test_replicas_and_http(fn):
    serve = runplane.new_function("serve", kind="serving")
    serve.spec.replicas = 2
    serve.spec.min_replicas = 1
    serve.spec.max_replicas = 4
    serve.with_http(workers=8, worker_timeout=10)
    assert (serve.spec.http.workers, serve.spec.http.worker_timeout) == (8, 10)
    with pytest.raises(ConflictError, match="with_http applies to serving functions"):
        fn.with_http(workers=2)


def test_min_above_max_is_refused_and_rolled_back():
    serve = runplane.new_function("serve", kind="serving")
    serve.spec.max_replicas = 4
    with pytest.raises(ConflictError) as caught:
        serve.spec.min_replicas = 5
    assert str(caught.value) == (
        "spec.min_replicas: min_replicas 5 is above max_replicas 4; min must be at most max "
        "(example: spec.min_replicas = 1; spec.max_replicas = 4)"
    )
    assert serve.spec.min_replicas is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "replicas",
            -1,
            "spec.replicas: -1 is not valid; input should be greater than or equal to 0",
        ),
        ("min_replicas", -1, "spec.min_replicas: -1 is not valid"),
        ("replicas", "two", "spec.replicas: 'two' is not valid; input should be a valid integer"),
        ("replica", 2, "spec.replica: 2 is not valid; this field does not exist"),
    ],
)
def test_bad_assignments(field, value, message):
    serve = runplane.new_function("serve", kind="serving")
    with pytest.raises(InvalidValueError) as caught:
        setattr(serve.spec, field, value)
    assert str(caught.value).startswith(message)


def test_bad_function_names_and_kinds():
    # As MLRun does: upper case and '_' are made a Kubernetes name, with a warning.
    with pytest.warns(UserWarning, match="'Training_Job' is not a valid Kubernetes name"):
        assert runplane.new_function("Training_Job").metadata.name == "training-job"
    with pytest.raises(InvalidValueError, match="metadata.name: 'a.b' is not valid"):
        runplane.new_function("a.b")
    with pytest.raises(InvalidValueError) as caught:
        runplane.new_function("t", kind="horovod")
    assert str(caught.value) == (
        "kind: 'horovod' is not valid; allowed kinds are job, serving, mpijob, dask, spark "
        "(example: kind='job')"
    )
    assert runplane.new_function("t", kind="nuclio").kind == "serving"
    assert runplane.new_function().metadata.name == ""  # named by its run's handler


def _fully_configured(tmp_path) -> Function:
    code = tmp_path / "train.py"
    code.write_text("def train(context, x: int = 1):\n    return x * 2\n")
    fn = runplane.code_to_function("training", filename=str(code), kind="job", handler="train")
    fn.with_requests(mem="1G", cpu=1).with_limits(mem="2G", cpu=2, gpus=1)
    fn.with_node_selection(
        node_selector={"app.iguazio.com/lifecycle": "non-preemptible"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
    )
    fn.with_preemption_mode("prevent").with_priority_class("high")
    fn.set_env("MY_ENV", "MY_VAL").set_env_from_secret("TOKEN", "creds", "token")
    fn.apply(runplane.mount_pvc("data-claim", "data", "/data"))
    fn.set_state_thresholds({"pending_not_scheduled": "1 min", "running": -1})
    fn.spec.retries = 2
    return fn


def test_round_trip_through_dict_yaml_and_file(tmp_path, monkeypatch):
    fn = _fully_configured(tmp_path)
    assert Function.from_dict(fn.to_dict()) == fn
    monkeypatch.chdir(tmp_path)
    fn.export()
    again = runplane.import_function("function.yaml")
    assert again == fn
    assert again.to_yaml() == fn.to_yaml()
    assert again.spec.resources.requests == {"memory": "1G", "cpu": 1}  # types kept as written


def _dumped_sections(tmp_path) -> list[Function]:
    """Functions that set each nested section, leave it alone, or set it to its defaults."""
    dask = runplane.new_function("cluster", kind="dask")
    dask.with_worker_requests(mem="1G", cpu=2).with_scheduler_limits(mem="2G")
    spark = runplane.new_function("etl", kind="spark")
    spark.with_driver_requests(cpu=1).with_executor_limits(mem="4G")
    emptied = runplane.new_function("emptied").with_requests(cpu=1)
    emptied.spec.resources = {"requests": {}, "limits": {}}  # set back to its defaults
    return [
        runplane.new_function("bare"),
        _fully_configured(tmp_path),
        dask,
        spark,
        emptied,
        Function.from_dict({"metadata": {"name": "given"}, "spec": {"build": {}, "resources": {}}}),
        runplane.new_function("served", kind="serving", image="app:1").with_http(workers=2),
    ]


def test_to_dict_leaves_out_what_pydantic_calls_default(tmp_path):
    """The dump built section by section is pydantic's ``exclude_defaults`` dump, in its
    order: a section left at or set back to its defaults is left out, as there."""
    for fn in _dumped_sections(tmp_path):
        expected = fn.model_dump(mode="json", exclude_defaults=True)
        dumped = fn.to_dict()
        assert dumped == expected
        assert list(dumped.get("spec", {})) == list(expected.get("spec", {}))  # in its order
    assert "resources" not in runplane.new_function("bare").to_dict().get("spec", {})


def test_code_to_function_embeds_the_code(tmp_path):
    fn = _fully_configured(tmp_path)
    import base64

    assert base64.b64decode(fn.spec.build.source).decode().startswith("def train(context")
    assert fn.spec.build.filename == "train.py"
    assert fn.spec.handler == "train"


def test_code_to_function_errors(tmp_path):
    code = tmp_path / "train.py"
    code.write_text("def train(context):\n    pass\n\ndef evaluate(context):\n    pass\n")
    with pytest.raises(InvalidValueError) as caught:
        runplane.code_to_function("training", filename=str(code), handler="trian")
    assert str(caught.value) == (
        "handler: 'trian' is not valid; the handler must be a function defined at the top of "
        "train.py; it defines: train, evaluate (example: handler='train')"
    )
    with pytest.raises(NotFoundError, match="'missing.py' does not exist"):
        runplane.code_to_function("training", filename="missing.py")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    with pytest.raises(InvalidValueError, match="the file must be valid Python"):
        runplane.code_to_function("broken", filename=str(broken))


def test_import_function_errors(tmp_path):
    with pytest.raises(OutOfScopeError, match="the MLRun function hub .* is not part of runplane"):
        runplane.import_function("hub://sklearn_classifier")
    with pytest.raises(NotFoundError, match="does not exist"):
        runplane.import_function(str(tmp_path / "function.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: job\nmetadata: {name: x}\nspec: {resources: {requests: {memory: 1g}}}\n")
    with pytest.raises(InvalidValueError, match=r"spec.resources.requests.memory: '1g'"):
        runplane.import_function(str(bad))
    typo = tmp_path / "typo.yaml"
    typo.write_text("kind: job\nmetadata: {name: x}\nspec: {replica: 2}\n")
    with pytest.raises(
        InvalidValueError, match="spec.replica: 2 is not valid; this field does not"
    ):
        runplane.import_function(str(typo))


def test_new_function_from_command(tmp_path):
    fn = runplane.new_function(command="train_model.py", image="python:3.12", handler="train")
    assert fn.metadata.name == "train-model"
    assert fn.spec.command == "train_model.py"
    assert fn.spec.image == "python:3.12"


def test_platforms_alias_matches_documents():
    from runplane import platforms

    assert platforms.mount_pvc is runplane.mount_pvc


def test_code_to_function_from_a_notebook(tmp_path):
    import base64
    import json

    notebook = tmp_path / "train.ipynb"
    notebook.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "source": ["# Training"]},
                    {"cell_type": "code", "source": ["%pip install x\n", "import os\n"]},
                    {"cell_type": "code", "source": ["def train(context):\n", "    return 1\n"]},
                ]
            }
        )
    )
    fn = runplane.code_to_function("training", filename=str(notebook), handler="train")
    code = base64.b64decode(fn.spec.build.source).decode()
    assert code == "import os\n\ndef train(context):\n    return 1\n"


def test_set_env_value_from_sources(fn):
    fn.set_env("POD", value_from={"fieldRef": {"fieldPath": "metadata.name"}})
    fn.set_env("CFG", value_from={"configMapKeyRef": {"name": "app", "key": "mode"}})
    assert fn.spec.env == [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "app", "key": "mode"}}},
    ]
    with pytest.raises(InvalidValueError, match="valueFrom has one of secretKeyRef"):
        fn.set_env("BAD", value_from={"secretKeyRef": {"name": "x"}})
    with pytest.raises(InvalidValueError, match="give either value or value_from"):
        fn.set_env("BOTH", value="1", value_from={"fieldRef": {"fieldPath": "x"}})
    assert [v["name"] for v in fn.spec.env] == ["POD", "CFG"]


def test_kind_local_is_read_as_a_job():
    fn = runplane.Function.from_dict({"kind": "local", "metadata": {"name": "old"}})
    assert fn.kind is FunctionKind.JOB
    assert fn.to_dict().get("kind", "job") == "job"  # exported as a job from now on

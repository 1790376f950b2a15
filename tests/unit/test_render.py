"""Rendering: pods, serving objects, defaults per key, policies, auto-mount; all schema-valid."""

from __future__ import annotations

import pytest

import runplane
from runplane.bootstrap import Invocation
from runplane.config import load_settings
from runplane.errors import ConfigError, ConflictError, InvalidValueError, PolicyError
from runplane.rendering import RunRef, render
from runplane.runtimes.request import build_request

from .conftest import assert_valid_manifests
from .pods import theirs


def rendered(fn, settings=None, **kwargs):
    result = render(fn, settings or load_settings(), **kwargs)
    assert_valid_manifests(result.manifests)
    return result


def container(result):
    return result.pod_spec["containers"][0]


def test_job_renders_one_pod_with_run_labels_and_name():
    fn = runplane.new_function("training", project="fraud").with_requests(cpu=1, mem="1Gi")
    result = rendered(fn, run=RunRef(uid="0123456789abcdef0123456789abcdef", attempt=2))
    pod, bootstrap = result.manifests
    assert pod["kind"] == "Pod"
    assert bootstrap["kind"] == "ConfigMap"  # the program the pod starts: see test_bootstrap
    assert pod["metadata"]["name"] == "training-0123456789abcdef-2"
    assert pod["metadata"]["labels"] == {
        "runplane.io/project": "fraud",
        "runplane.io/function": "training",
        "runplane.io/run-uid": "0123456789abcdef0123456789abcdef",
        "runplane.io/attempt": "2",
    }
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["priorityClassName"] == "medium"
    assert container(result)["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}


def test_rendering_is_deterministic_and_never_writes_back():
    fn = runplane.new_function("training").with_limits(cpu=2, gpus=1)
    before = fn.to_dict()
    assert render(fn, load_settings()) == render(fn, load_settings())
    assert fn.to_dict() == before


def test_rendering_decides_the_runs_resources_once_as_written_and_as_numbers():
    settings = load_settings(function_defaults={"resources": {"limits": {"memory": "2Gi"}}})
    fn = runplane.new_function("training").with_requests(cpu="250m", mem="1Gi")
    fn.with_limits(cpu=1.5, gpus=1).with_code(body="def handler():\n    pass\n")
    fn.spec.handler = "handler"
    request = build_request(fn, settings, uid="r" * 32)
    resources = request.resources
    assert resources.requests.written == {"cpu": "250m", "memory": "1Gi"}
    assert resources.limits.written == {"memory": "2Gi", "cpu": "1.5", "nvidia.com/gpu": "1"}
    assert (resources.requests.cpu, resources.requests.memory) == (250, 2**30)
    assert (resources.limits.cpu, resources.limits.memory, resources.limits.gpus) == (
        1500,
        2 * 2**30,
        1,
    )
    assert (resources.mode, resources.priority_class) == ("prevent", "medium")
    assert resources.priority == settings.priority_classes.value_of("medium")
    assert request.priority == resources.priority
    assert request.process_resources is resources


def test_gpus_are_requested_equal_to_their_limit():
    fn = runplane.new_function("training").with_limits(mem="2G", cpu=2, gpus=2)
    assert container(rendered(fn))["resources"] == {
        "requests": {"nvidia.com/gpu": "2"},
        "limits": {"memory": "2G", "cpu": "2", "nvidia.com/gpu": "2"},
    }
    amd = runplane.new_function("training").with_limits(gpus=1, gpu_type="amd.com/gpu")
    assert container(rendered(amd))["resources"]["requests"] == {"amd.com/gpu": "1"}


def test_zero_gpus_render_nothing():
    fn = runplane.new_function("training").with_limits(cpu=1, gpus=0)
    assert container(rendered(fn))["resources"] == {"limits": {"cpu": "1"}}


def test_service_defaults_fill_only_unset_keys():
    settings = load_settings(
        function_defaults={
            "resources": {
                "requests": {"cpu": "250m", "memory": "256Mi"},
                "limits": {"cpu": "2", "memory": "4Gi"},
            }
        }
    )
    fn = runplane.new_function("training").with_requests(mem="1Gi").with_limits(cpu=4)
    assert container(rendered(fn, settings))["resources"] == {
        "requests": {"cpu": "250m", "memory": "1Gi"},
        "limits": {"cpu": "4", "memory": "4Gi"},
    }


def test_a_default_gpu_limit_reaches_functions_that_name_no_gpu_of_their_own():
    settings = load_settings(function_defaults={"resources": {"limits": {"nvidia.com/gpu": 1}}})
    plain = rendered(runplane.new_function("training"), settings)
    assert container(plain)["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "gpus-from-defaults" in {lint.code for lint in plain.lints}
    # Their own choice wins, zero included; dask and spark roles ask for GPUs themselves.
    own = rendered(
        runplane.new_function("big").with_limits(gpus=2, gpu_type="amd.com/gpu"), settings
    )
    assert container(own)["resources"]["limits"] == {"amd.com/gpu": "2"}
    assert "gpus-from-defaults" not in {lint.code for lint in own.lints}
    none = rendered(runplane.new_function("cpu-only").with_limits(gpus=0), settings)
    assert "resources" not in container(none) or "limits" not in container(none)["resources"]
    dask = render(runplane.new_function("cluster", kind="dask"), settings)
    assert "nvidia.com/gpu" not in str(dask.manifests)


def test_a_default_limit_below_the_users_request_is_explained():
    settings = load_settings(function_defaults={"resources": {"limits": {"memory": "2Gi"}}})
    fn = runplane.new_function("training").with_requests(mem="8Gi")
    with pytest.raises(ConflictError) as caught:
        render(fn, settings)
    assert str(caught.value) == (
        "resources.requests.memory: request '8Gi' is above the service default limit '2Gi'; "
        "set with_limits(mem=...) at or above the request"
    )


def test_default_node_selector_merges_and_empty_value_removes():
    settings = load_settings(function_defaults={"node_selector": {"team": "ml", "zone": "a"}})
    fn = runplane.new_function("training").with_node_selection(
        node_selector={"zone": "b", "team": ""}
    )
    assert rendered(fn, settings).pod_spec["nodeSelector"] == {"zone": "b"}
    assert rendered(runplane.new_function("t"), settings).pod_spec["nodeSelector"] == {
        "team": "ml",
        "zone": "a",
    }


def test_default_tolerations_join_the_functions_own():
    taint = {"key": "real", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    settings = load_settings(function_defaults={"tolerations": [taint]})
    mine = {"key": "team", "operator": "Exists", "effect": "NoSchedule"}
    fn = runplane.new_function("t").with_node_selection(tolerations=[mine, taint])
    assert rendered(fn, settings).pod_spec["tolerations"] == [mine, taint]  # once each
    assert rendered(runplane.new_function("t"), settings).pod_spec["tolerations"] == [taint]
    with pytest.raises(ConfigError, match=r"function_defaults.tolerations\[0\].operator"):
        load_settings(function_defaults={"tolerations": [{"operator": "Sometimes"}]})


def test_unknown_priority_class_lists_the_valid_ones():
    fn = runplane.new_function("training").with_priority_class("urgent")
    with pytest.raises(InvalidValueError) as caught:
        render(fn, load_settings())
    assert str(caught.value) == (
        "priority_class_name: 'urgent' is not valid; valid priority classes are low, medium, high "
        "(example: with_priority_class(name='high'))"
    )
    custom = load_settings(priority_classes={"valid": ["batch", "interactive"]})
    assert (
        rendered(fn.with_priority_class("batch"), custom).pod_spec["priorityClassName"] == "batch"
    )


def test_system_priority_class_and_roles_are_policy():
    fn = runplane.new_function("training").with_priority_class("runplane-system")
    with pytest.raises(PolicyError, match="system class reserved for core services"):
        render(fn, load_settings())
    settings = load_settings(priority_classes={"allowed_roles": {"high": ["admin"]}})
    fn.with_priority_class("high")
    with pytest.raises(PolicyError) as caught:
        render(fn, settings, role="user")
    assert str(caught.value) == (
        "priority_class_name: role 'user' may not use priority class 'high' (allowed roles: admin)"
    )
    assert rendered(fn, settings, role="admin").pod_spec["priorityClassName"] == "high"


def test_reserved_node_group_is_refused():
    fn = runplane.new_function("training").with_node_selection(
        node_selector={"runplane.io/node-group": "system"}
    )
    with pytest.raises(PolicyError) as caught:
        render(fn, load_settings())
    assert str(caught.value) == (
        "node_selector: runplane.io/node-group=system targets the node group 'system', which is "
        "reserved for core services; choose another node group"
    )
    by_affinity = runplane.new_function("training").with_node_selection(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "runplane.io/node-group",
                                    "operator": "In",
                                    "values": ["gpu", "system"],
                                }
                            ]
                        }
                    ]
                }
            }
        }
    )
    with pytest.raises(PolicyError, match="targets the node group 'system'"):
        render(by_affinity, load_settings())


def test_environment_and_code_reach_the_container(tmp_path):
    code = tmp_path / "train.py"
    code.write_text("def train(context, epochs: int = 1):\n    return 1\n")
    fn = runplane.code_to_function("training", filename=str(code), handler="train")
    fn.set_env("MY_ENV", "MY_VAL").set_env_from_secret("TOKEN", "creds", "token")
    env = container(rendered(fn, run=RunRef("abc", 1)))["env"]
    assert [item["name"] for item in env] == [
        "RUNPLANE_PROJECT",
        "RUNPLANE_FUNCTION",
        "RUNPLANE_HANDLER",
        "RUNPLANE_EXEC_CODE",
        "RUNPLANE_RUN_DIR",
        "MY_ENV",
        "TOKEN",
    ]
    assert env[-1] == {
        "name": "TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}},
    }
    # A run's pod carries the whole invocation, in the names the container's entry reads.
    request = build_request(fn, load_settings(), uid="f" * 32, params={"epochs": "3"})
    carried = {item["name"]: item.get("value") for item in request.pod_spec["containers"][0]["env"]}
    assert Invocation.from_env(carried) == request.invocation
    assert request.invocation.params == {"epochs": 3}
    assert carried["MY_ENV"] == "MY_VAL"
    assert_valid_manifests(request.manifests)


def test_runplanes_own_variables_are_not_the_functions_to_set():
    fn = runplane.new_function("training")
    for name in ("RUNPLANE_PROJECT", "RUNPLANE_PARAMS", "RUNPLANE_RUN_UID"):
        with pytest.raises(InvalidValueError, match=f"'{name}' is not valid; runplane sets"):
            fn.set_env(name, "x")
    fn.set_env("RUNPLANE_API", "http://service:8470")  # a run may talk to a runplane service
    assert fn.spec.env == [{"name": "RUNPLANE_API", "value": "http://service:8470"}]


def test_v3io_access_key_renders_as_a_referenced_secret():
    fn = runplane.new_function("training").apply(
        runplane.mount_v3io(
            name="data", access_key="XYZ123..", volume_mounts=[runplane.VolumeMount("/data", "p/d")]
        )
    )
    result = rendered(fn)
    pod, secret, _ = result.manifests
    volume = pod["spec"]["volumes"][0]
    assert volume == {
        "name": "data",
        "flexVolume": {"driver": "v3io/fuse", "secretRef": {"name": "training-data-v3io"}},
    }
    assert "XYZ123.." not in str(pod)
    assert secret["kind"] == "Secret"
    assert secret["stringData"] == {"accessKey": "XYZ123.."}


def test_auto_mount_applies_unless_disabled_or_taken():
    settings = load_settings(
        auto_mount={"type": "pvc", "source": "shared", "mount_path": "/shared"}
    )
    fn = runplane.new_function("training")
    spec = rendered(fn, settings).pod_spec
    assert theirs(spec["volumes"]) == [
        {"name": "auto-mount", "persistentVolumeClaim": {"claimName": "shared"}}
    ]
    assert theirs(spec["containers"][0]["volumeMounts"]) == [
        {"name": "auto-mount", "mountPath": "/shared"}
    ]
    assert fn.spec.volumes == []  # applied at render time only
    fn.spec.disable_auto_mount = True
    assert theirs(rendered(fn, settings).pod_spec["volumes"]) == []
    mine = runplane.new_function("mine").apply(runplane.mount_pvc("data", "data", "/shared"))
    assert theirs(rendered(mine, settings).pod_spec["volumes"]) == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    ]


def test_serving_fixed_replicas():
    serve = runplane.new_function("serve", kind="serving").with_requests(cpu=1, mem="1Gi")
    serve.spec.replicas = 3
    serve.with_http(workers=8, worker_timeout=10)
    result = rendered(serve)
    assert [m["kind"] for m in result.manifests] == ["Deployment", "Service", "ConfigMap"]
    deployment, service, _ = result.manifests
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "runplane.io/project": "default",
        "runplane.io/function": "serve",
    }
    assert result.pod_spec["restartPolicy"] == "Always"
    env = {e["name"]: e["value"] for e in container(result)["env"]}
    assert env["RUNPLANE_HTTP_WORKERS"] == "8"
    assert env["RUNPLANE_HTTP_WORKER_TIMEOUT"] == "10"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}
    ]


def test_serving_autoscaling_renders_an_hpa_and_starts_within_range():
    serve = runplane.new_function("serve", kind="serving").with_requests(cpu=1)
    serve.spec.replicas = 2
    serve.spec.min_replicas = 1
    serve.spec.max_replicas = 4
    serve.spec.target_cpu_percent = 60
    deployment, _, hpa, _ = rendered(serve).manifests
    assert deployment["spec"]["replicas"] == 2
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"] == {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "serve"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 60},
                },
            }
        ],
    }
    serve.spec.replicas = 10
    assert rendered(serve).manifests[0]["spec"]["replicas"] == 4


def test_serving_min_without_max_is_an_error():
    serve = runplane.new_function("serve", kind="serving")
    serve.spec.min_replicas = 2
    with pytest.raises(InvalidValueError, match="autoscaling needs max_replicas"):
        render(serve, load_settings())


def test_replicas_on_a_job_are_refused():
    fn = runplane.new_function("training")
    fn.spec.replicas = 2
    with pytest.raises(
        ConflictError, match="replicas apply to serving, mpijob, dask and spark functions; a job"
    ):
        render(fn, load_settings())


def test_everything_at_once_is_schema_valid(tmp_path):
    fn = runplane.new_function("everything", project="p", labels={"team": "ml"})
    fn.with_requests(mem="1G", cpu="500m").with_limits(mem="1G", cpu=1, gpus=1)
    fn.with_node_selection(
        node_name="node-1",
        node_selector={"zone": "a"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
        affinity={
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"a": "b"}},
                            "topologyKey": "zone",
                        },
                    }
                ]
            }
        },
    )
    fn.with_preemption_mode("constrain").with_priority_class("low")
    fn.apply(runplane.mount_configmap("cfg", "/etc/cfg"))
    fn.apply(runplane.mount_secret("sec", "/etc/sec"))
    fn.apply(runplane.mount_v3io(user="u"))
    fn.set_env("A", "1")
    fn.spec.args = ["--epochs", "3"]
    result = rendered(fn, run=RunRef("f" * 32))
    assert container(result)["args"] == ["--epochs", "3"]


def test_priority_classes_never_evict_except_system():
    from runplane.rendering.cluster import priority_classes

    manifests = priority_classes(load_settings().priority_classes)
    assert_valid_manifests(manifests)
    policies = {m["metadata"]["name"]: (m["value"], m["preemptionPolicy"]) for m in manifests}
    assert policies == {
        "low": (1000, "Never"),
        "medium": (2000, "Never"),
        "high": (3000, "Never"),
        "runplane-system": (1_000_000, "PreemptLowerPriority"),
    }


def test_pod_annotations():
    fn = runplane.new_function("training")
    fn.spec.annotations = {"example.com/owner": "team-ml"}
    pod = rendered(fn).manifests[0]
    assert pod["metadata"]["annotations"] == {"example.com/owner": "team-ml"}
    serve = runplane.new_function("serve", kind="serving")
    serve.spec.annotations = {"example.com/owner": "team-ml"}
    template = rendered(serve).manifests[0]["spec"]["template"]
    assert template["metadata"]["annotations"] == {"example.com/owner": "team-ml"}
    with pytest.raises(InvalidValueError, match="spec.annotations key: 'bad key'"):
        fn.spec.annotations = {"bad key": "x"}
    assert fn.spec.annotations == {"example.com/owner": "team-ml"}

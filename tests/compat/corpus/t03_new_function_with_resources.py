"""mlconf.default_function_pod_resources fills what a function's resources leave out.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_run.py::test_new_function_with_resources; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
Fails on MLRun 1.12.1 (drift since that commit): its to_dict() adds spec.mount_otlp_secret, a field added after the test's commit.
"""
import copy

import mlrun

def get_runtime():
    return {
        "kind": "job",
        "metadata": {
            "name": "spark-submit",
            "project": "default",
            "hash": "7b3064c6b334535a5d949ebe9cfc61a094f98c78",
            "updated": "2020-10-21T22:40:35.042132+00:00",
            "credentials": {"access_key": "some-access-key"},
        },
        "spec": {
            "command": "spark-submit",
            "args": [
                "--class",
                "org.apache.spark.examples.SparkPi",
                "/spark/examples/jars/spark-examples_2.11-2.4.4.jar",
            ],
            "image": "iguazio/shell:3.0_b5533_20201020062229",
            "mode": "pass",
            "description": "",
            "affinity": None,
            "disable_auto_mount": False,
            "priority_class_name": "",
            "tolerations": None,
            "node_selector": "",
            "state_thresholds": mlrun.mlconf.function.spec.state_thresholds.default.to_dict(),
        },
        "verbose": False,
    }


runtime = get_runtime()
for test_case in [
    {
        "resources": {"requests": {"cpu": "50mi"}},
        "default_resources": {
            "requests": {"cpu": "25mi", "memory": "1M", "gpu": None},
            "limits": {"cpu": "1", "memory": "1G", "gpu": None},
        },
        "expected_resources": {
            "requests": {"cpu": "50mi", "memory": "1M"},
            "limits": {"cpu": "1", "memory": "1G"},
        },
    },
    {
        "resources": {"requests": {"cpu": "50mi"}},
        "default_resources": {
            "requests": {"cpu": "25mi", "memory": "1M", "gpu": "1"},
            "limits": {"cpu": "1", "memory": "1G", "gpu": "1"},
        },
        "expected_resources": {
            "requests": {"cpu": "50mi", "memory": "1M"},
            "limits": {"cpu": "1", "memory": "1G"},
        },
    },
    {
        "resources": {
            "requests": {"cpu": "50mi"},
            "limits": {"nvidia.com/gpu": "1"},
        },
        "default_resources": {
            "requests": {"cpu": "25mi", "memory": "1M"},
            "limits": {"cpu": "1", "memory": "1G"},
        },
        "expected_resources": {
            "requests": {"cpu": "50mi", "memory": "1M"},
            "limits": {"cpu": "1", "memory": "1G", "nvidia.com/gpu": "1"},
        },
    },
]:
    expected_runtime = copy.deepcopy(runtime)
    expected_runtime["spec"]["resources"] = test_case.get("expected_resources")
    expected_runtime["spec"]["preemption_mode"] = mlrun.mlconf.function_defaults.preemption_mode
    runtime["spec"]["resources"] = test_case.get("resources", None)
    mlrun.mlconf.default_function_pod_resources = test_case.get("default_resources")
    function = mlrun.new_function(runtime=runtime)
    assert function.to_dict() == expected_runtime, function.to_dict()

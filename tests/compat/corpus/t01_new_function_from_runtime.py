"""A function's dict form round-trips through new_function(runtime=dict).

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_run.py::test_new_function_from_runtime; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
Fails on MLRun 1.12.1 (drift since that commit): its to_dict() adds spec.mount_otlp_secret, a field added after the test's commit.
"""

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
function = mlrun.new_function(runtime=runtime)
expected_runtime = runtime
expected_runtime["spec"]["preemption_mode"] = mlrun.mlconf.function_defaults.preemption_mode
assert function.to_dict() == expected_runtime, function.to_dict()

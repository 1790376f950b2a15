"""with_requests(patch=True) adds to the requests; without patch it replaces them.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_run.py::test_with_request_patch; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
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
runtime["spec"]["resources"] = {"requests": {"cpu": "50mi"}}
function = mlrun.new_function(runtime=runtime)
function.with_requests(mem="9G", patch=True)
expected = {
    "requests": {"cpu": "50mi", "memory": "9G"},
    "limits": {},
}
assert function.spec.resources == expected, function.spec.resources
function.with_requests(cpu="15")  # default patch = False
expected = {
    "requests": {"cpu": "15"},
    "limits": {},
}
assert function.spec.resources == expected, function.spec.resources

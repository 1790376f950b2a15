"""build_config keeps commands and requirements apart, each in order.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_build_config_commands_and_requirements_order; the same calls and asserted
values; the runtime made as the test class makes it (KubejobRuntime(), image
mlrun/mlrun:latest, project test-project), DeepDiff(a, b) == {} written as a == b and
pytest.raises as try/except.
"""
import mlrun
import mlrun.errors


def generate_runtime():
    runtime = mlrun.runtimes.KubejobRuntime()
    runtime.spec.image = "mlrun/mlrun:latest"
    runtime.metadata.project = "test-project"
    return runtime


runtime = generate_runtime()
runtime.build_config(commands=["apt-get update"], requirements=["scikit-learn"])
expected_commands = ["apt-get update"]
expected_requirements = ["scikit-learn"]
assert expected_commands == runtime.spec.build.commands, runtime.spec.build.commands
assert expected_requirements == runtime.spec.build.requirements, runtime.spec.build.requirements

"""with_commands appends new commands once each, overwrite=True replaces them.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_with_commands; the same calls and asserted
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
runtime.with_commands(["pip install pandas", "pip install numpy"])
expected_commands = ["pip install pandas", "pip install numpy"]
assert expected_commands == runtime.spec.build.commands, runtime.spec.build.commands
runtime.with_commands(["pip install scikit-learn"])
expected_commands = [
    "pip install pandas",
    "pip install numpy",
    "pip install scikit-learn",
]
assert expected_commands == runtime.spec.build.commands, runtime.spec.build.commands
runtime.with_commands(["pip install tensorflow", "pip install pandas"])
expected_commands = [
    "pip install pandas",
    "pip install numpy",
    "pip install scikit-learn",
    "pip install tensorflow",
]
assert expected_commands == runtime.spec.build.commands, runtime.spec.build.commands
runtime.with_commands(["pip install tensorflow", "pip install pandas"], overwrite=True)
expected_commands = ["pip install tensorflow", "pip install pandas"]
assert expected_commands == runtime.spec.build.commands, runtime.spec.build.commands

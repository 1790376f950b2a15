"""build_config sets the base image, adds or replaces commands and requirements.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_build_config; the same calls and asserted
values; the runtime made as the test class makes it (KubejobRuntime(), image
mlrun/mlrun:latest, project test-project), DeepDiff(a, b) == {} written as a == b and
pytest.raises as try/except.
Fails on MLRun 1.12.1 (drift since that commit): build_config(commands=) replaces the commands instead of adding to them.
"""
import mlrun
import mlrun.errors


def generate_runtime():
    runtime = mlrun.runtimes.KubejobRuntime()
    runtime.spec.image = "mlrun/mlrun:latest"
    runtime.metadata.project = "test-project"
    return runtime


runtime = generate_runtime()
runtime.build_config(base_image="mlrun/mlrun", commands=["python -m pip install pandas"])
expected_commands = ["python -m pip install pandas"]
assert sorted(expected_commands) == sorted(runtime.spec.build.commands)

assert runtime.spec.build.base_image == "mlrun/mlrun"

runtime.build_config(commands=["python -m pip install numpy"])
expected_commands = [
    "python -m pip install pandas",
    "python -m pip install numpy",
]
assert expected_commands == runtime.spec.build.commands, runtime.spec.build.commands

runtime.build_config(commands=["python -m pip install scikit-learn"], overwrite=True)
expected_commands = ["python -m pip install scikit-learn"]
assert sorted(expected_commands) == sorted(runtime.spec.build.commands)

runtime.build_config(requirements=["pandas", "numpy"])
expected_requirements = [
    "pandas",
    "numpy",
]
assert expected_requirements == runtime.spec.build.requirements, runtime.spec.build.requirements
expected_commands = ["python -m pip install scikit-learn"]
assert sorted(expected_commands) == sorted(runtime.spec.build.commands)

runtime.build_config(requirements=["scikit-learn"], overwrite=True)
expected_requirements = ["scikit-learn"]
assert sorted(expected_requirements) == sorted(runtime.spec.build.requirements)

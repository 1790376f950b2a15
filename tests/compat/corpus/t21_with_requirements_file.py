"""with_requirements(requirements_file=) reads the file's requirements, comments dropped.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_with_requirements; the same calls and asserted
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


open("requirements-test.txt", "w").write(
    "# this file is not named requirements.txt so that test_requirement_specifiers_convention"
    " will not check it.\n# comment\nfaker\npython-dotenv\nchardet>=3.0.2, <4.0 # inline comment\n"
)
runtime = generate_runtime()
runtime.with_requirements(requirements_file="requirements-test.txt")
expected_requirements = ["faker", "python-dotenv", "chardet>=3.0.2, <4.0"]
assert sorted(expected_requirements) == sorted(runtime.spec.build.requirements), (
    runtime.spec.build.requirements
)

"""with_code refuses both a body and a file.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_run_with_code_and_file; the same calls and asserted
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


open("sample_function.py", "w").write("def test_func(context, p1):\n    return p1 + 1\n")
runtime = generate_runtime()
expected_code = """
        def my_func(context):
            print("Hello cruel world")
                """
try:
    runtime.with_code(from_file="sample_function.py", body=expected_code)
except mlrun.errors.MLRunInvalidArgumentError as excinfo:
    assert "must provide either body or from_file argument. not both" in str(excinfo), str(
        excinfo
    )
else:
    raise AssertionError("no MLRunInvalidArgumentError")

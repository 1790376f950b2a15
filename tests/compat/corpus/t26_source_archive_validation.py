"""with_source_archive refuses a relative source unless it is pulled at run time.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_with_source_archive_validation; the same calls and asserted
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
source = "./some/relative/path"
try:
    runtime.with_source_archive(source, pull_at_runtime=False)
except mlrun.errors.MLRunInvalidArgumentError as e:
    assert (
        f"Source '{source}' must be a valid URL or absolute path when 'pull_at_runtime' is False "
        "set 'source' to a remote URL to clone/copy the source to the base image, "
        "or set 'pull_at_runtime' to True to pull the source at runtime."
        in str(e)
    ), str(e)
else:
    raise AssertionError("no MLRunInvalidArgumentError")

"""build_config(base_image=, image=) sets the build's base and target images.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_build_config_with_images; the same calls and asserted
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
runtime.build_config(base_image="mlrun/mlrun", image="target/mlrun")
assert runtime.spec.build.base_image == "mlrun/mlrun"
assert runtime.spec.build.image == "target/mlrun"

runtime = generate_runtime()
runtime.build_config(image="target/mlrun")
assert runtime.spec.build.image == "target/mlrun"

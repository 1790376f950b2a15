"""set_image_pull_configuration sets the policy and secret and refuses an unknown policy.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/api/runtimes/test_kubejob.py::TestKubejobRuntime.test_with_image_pull_configuration; the same calls and asserted
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


import re

runtime = generate_runtime()
policy = "IfNotPresent"
secret = "some_secret"
runtime.set_image_pull_configuration(image_pull_policy=policy, image_pull_secret_name=secret)
assert runtime.spec.image_pull_policy == policy and runtime.spec.image_pull_secret == secret

try:
    runtime.set_image_pull_configuration(image_pull_policy="invalidPolicy")
except mlrun.errors.MLRunInvalidArgumentError as excinfo:
    assert re.search("Image pull policy must be one of", str(excinfo)), str(excinfo)
else:
    raise AssertionError("no MLRunInvalidArgumentError")

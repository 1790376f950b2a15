"""to_dict() sanitises Kubernetes objects; strip=True drops mounts and secret values; exclude= leaves out a section.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_pod.py::test_to_dict; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
"""
import kubernetes.client

import mlrun

volume_mount = kubernetes.client.V1VolumeMount(mount_path="some-path", name="volume-name")
function = mlrun.new_function(kind=mlrun.runtimes.RuntimeKinds.job)
# For sanitization
function.spec.volume_mounts = [volume_mount]
# For enrichment
function.set_env(name="V3IO_ACCESS_KEY", value="123")
# For apply enrichment before to_dict completion
function.spec.disable_auto_mount = True

function_dict = function.to_dict()
assert function_dict["spec"]["volume_mounts"][0]["mountPath"] == "some-path"
assert function_dict["spec"]["env"][0]["name"] == "V3IO_ACCESS_KEY"
assert function_dict["spec"]["env"][0]["value"] == "123"
assert function_dict["spec"]["disable_auto_mount"] is True

stripped_function_dict = function.to_dict(strip=True)
assert "volume_mounts" not in stripped_function_dict["spec"]
assert stripped_function_dict["spec"]["env"][0]["name"] == "V3IO_ACCESS_KEY"
assert stripped_function_dict["spec"]["env"][0]["value"] == ""
assert stripped_function_dict["spec"]["disable_auto_mount"] is False

excluded_function_dict = function.to_dict(exclude=["spec"])
assert "spec" not in excluded_function_dict

"""The same volume mount given as an object, its dict and its sanitised dict is kept once.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_pod.py::test_volume_mounts_addition; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
"""
import kubernetes.client

import mlrun

volume_mount = kubernetes.client.V1VolumeMount(mount_path="some-path", name="volume-name")
dict_volume_mount = volume_mount.to_dict()
sanitized_dict_volume_mount = kubernetes.client.ApiClient().sanitize_for_serialization(
    volume_mount
)
function = mlrun.new_function(kind=mlrun.runtimes.RuntimeKinds.job)
function.spec.volume_mounts = [
    volume_mount,
    dict_volume_mount,
    sanitized_dict_volume_mount,
]
assert len(function.spec.volume_mounts) == 1, function.spec.volume_mounts

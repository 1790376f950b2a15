"""KubeResourceSpec fills its resources from mlconf.default_function_pod_resources.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/runtimes/test_pod.py::test_resource_enrichment_in_resource_spec_initialization; the same calls and asserted values, DeepDiff(a, b) == {}
written as a == b and pytest.raises as try/except.
"""
import mlrun
import mlrun.runtimes.pod

mlrun.mlconf.default_function_pod_resources = {
    "requests": {"cpu": "25m", "memory": "1M"},
    "limits": {"cpu": "2", "memory": "1G"},
}
expected_resources = {
    "requests": {"cpu": "25m", "memory": "1M"},
    "limits": {"cpu": "2", "memory": "1G"},
}

# without setting resources
spec = mlrun.runtimes.pod.KubeResourceSpec()
assert spec.resources == expected_resources, spec.resources

# setting partial requests
mlrun.mlconf.default_function_pod_resources = {
    "requests": {"cpu": "25m", "memory": "1M"},
    "limits": {"cpu": "2", "memory": "1G"},
}
expected_resources = {
    "requests": {"cpu": "1", "memory": "1M"},
    "limits": {"cpu": "2", "memory": "1G"},
}
spec_requests = {"cpu": "1"}
spec = mlrun.runtimes.pod.KubeResourceSpec(resources={"requests": spec_requests})
assert spec.resources == expected_resources, spec.resources

# setting partial requests and limits
mlrun.mlconf.default_function_pod_resources = {
    "requests": {"cpu": "25m", "memory": "1M"},
    "limits": {"cpu": "2", "memory": "1G"},
}
expected_resources = {
    "requests": {"cpu": "1", "memory": "500M"},
    "limits": {"cpu": "2", "memory": "2G"},
}
spec_requests = {"cpu": "1", "memory": "500M"}
spec_limits = {"memory": "2G"}
spec = mlrun.runtimes.pod.KubeResourceSpec(
    resources={"requests": spec_requests, "limits": spec_limits}
)
assert spec.resources == expected_resources, spec.resources

# setting resource not in the k8s resources patterns
try:
    spec_requests = {"cpu": "1wrong"}
    mlrun.runtimes.pod.KubeResourceSpec(
        resources={"requests": spec_requests, "limits": spec_limits}
    )
except mlrun.errors.MLRunInvalidArgumentError:
    pass
else:
    raise AssertionError("no MLRunInvalidArgumentError")

# setting partial requests and limits with equal gpus
mlrun.mlconf.default_function_pod_resources = {
    "requests": {"cpu": "25m", "memory": "1M"},
    "limits": {"cpu": "2", "memory": "1G"},
}
expected_resources = {
    "requests": {"cpu": "25m", "memory": "1M"},
    "limits": {"cpu": "2", "memory": "1G", "nvidia.com/gpu": "2"},
}
spec_requests = {"nvidia.com/gpu": "2"}
spec_limits = {"nvidia.com/gpu": "2"}
spec = mlrun.runtimes.pod.KubeResourceSpec(
    resources={"requests": spec_requests, "limits": spec_limits}
)
assert spec.resources == expected_resources, spec.resources

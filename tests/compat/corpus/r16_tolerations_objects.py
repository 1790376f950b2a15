"""Node selection with Kubernetes client tolerations."""
import mlrun
from kubernetes import client as k8s_client

fn = mlrun.new_function("tol-job", kind="job", image="mlrun/mlrun")
fn.with_node_selection(tolerations=[
    k8s_client.V1Toleration(key="gpu", operator="Exists", effect="NoSchedule")
])
print(fn.spec.tolerations)

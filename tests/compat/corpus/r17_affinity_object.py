"""Node selection with a Kubernetes client affinity."""
import mlrun
from kubernetes import client as k8s_client

affinity = k8s_client.V1Affinity(
    node_affinity=k8s_client.V1NodeAffinity(
        required_during_scheduling_ignored_during_execution=k8s_client.V1NodeSelector(
            node_selector_terms=[k8s_client.V1NodeSelectorTerm(match_expressions=[
                k8s_client.V1NodeSelectorRequirement(
                    key="node.kubernetes.io/instance-type", operator="In", values=["m5.large"])
            ])]
        )
    )
)
fn = mlrun.new_function("aff-job", kind="job", image="mlrun/mlrun")
fn.with_node_selection(affinity=affinity)
print(fn.spec.affinity)

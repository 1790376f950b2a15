"""Node affinity: assign a job to on-demand nodes with the SDK."""
import mlrun

func = mlrun.new_function("job", kind="job", image="mlrun/mlrun")
func.with_node_selection(node_selector={"app.iguazio.com/lifecycle": "non-preemptible"})
print(func.spec.node_selector)
assert func.spec.node_selector == {"app.iguazio.com/lifecycle": "non-preemptible"}

"""Node affinity: assign a job to spot nodes with the SDK."""
import mlrun

func = mlrun.new_function("job", kind="job", image="mlrun/mlrun")
func.with_node_selection(node_selector={"app.iguazio.com/lifecycle": "preemptible"})
func.with_preemption_mode(mode="constrain")
print(func.spec.node_selector, func.spec.preemption_mode)

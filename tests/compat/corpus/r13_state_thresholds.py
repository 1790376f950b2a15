"""Preventing stuck pods: function and run state thresholds."""
import mlrun

open("job.py", "w").write("def handler(context, x=1):\n    return x\n")
func = mlrun.code_to_function("thresholds", filename="job.py", kind="job", handler="handler")
func.set_state_thresholds({"pending_not_scheduled": "1 min"})
run = func.run(params={"x": 1},
               state_thresholds={"running": "1 min", "image_pull_backoff": "1 minute and 30s"})
assert run.state() == "completed"

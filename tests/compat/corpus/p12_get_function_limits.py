"""get_function, change its resources, run it."""
import mlrun

open("train.py", "w").write("def train(context):\n    context.log_result('ok', 1)\n")
project = mlrun.get_or_create_project("limits", context="./")
project.set_function("train.py", name="train", kind="job", handler="train")
trainer = project.get_function("train")
trainer.with_limits(mem="2G", cpu=2)
run = project.run_function(trainer, local=True)
assert run.outputs["ok"] == 1

"""Cheat sheet: general project workflow with a local run."""
import mlrun

open("train_model.py", "w").write(
    "def train(context, p1: int = 1):\n    context.log_result('accuracy', p1 * 2)\n"
)
project = mlrun.get_or_create_project(name="my-project", context="./")
project.set_function(name="train_model", func="train_model.py", kind="job", image="mlrun/mlrun",
                     handler="train")
project.save()
run = project.run_function("train_model", params={"p1": 3}, local=True)
assert run.outputs["accuracy"] == 6

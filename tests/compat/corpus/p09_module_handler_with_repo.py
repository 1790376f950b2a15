"""Register a module.handler as a function with with_repo."""
import os
import mlrun

os.makedirs("src", exist_ok=True)
open("src/training.py", "w").write("def train(context):\n    context.log_result('ok', 1)\n")
project = mlrun.get_or_create_project("repo-demo", context="./")
project.spec.workdir = "src"
project.set_function(name="train", handler="training.train", image="mlrun/mlrun", kind="job",
                     with_repo=True)
run = project.run_function("train", local=True)
assert run.outputs["ok"] == 1

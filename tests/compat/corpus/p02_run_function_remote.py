"""Cheat sheet: job runtime through the project (not local)."""
import mlrun

open("my_job.py", "w").write("def handler(context):\n    context.log_result('ok', 1)\n")
project = mlrun.get_or_create_project("jobs", context="./")
job = project.set_function(name="my-job", func="my_job.py", kind="job", image="mlrun/mlrun",
                           handler="handler")
run = project.run_function(job)
assert run.outputs["ok"] == 1

"""Cheat sheet: project secrets read with context.get_secret."""
import mlrun

open("job.py", "w").write(
    "def handler(context):\n    context.log_result('has_key', context.get_secret('AWS_KEY') is not None)\n"
)
project = mlrun.get_or_create_project("secrets-demo", context="./")
project.set_secrets(secrets={"AWS_KEY": "111222333"}, provider="kubernetes")
fn = project.set_function("job.py", name="job", kind="job", handler="handler")
run = project.run_function(fn)
assert run.outputs["has_key"] is True

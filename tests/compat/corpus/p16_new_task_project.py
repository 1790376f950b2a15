"""Run, build, and deploy: new_task with a project function."""
import mlrun
from mlrun import RunTemplate, new_task, mlconf
from os import path

project = mlrun.get_or_create_project("example-project", context="./")
artifact_path = path.join(mlconf.artifact_path, "{{run.uid}}")

def handler(context, param, model_names):
    context.logger.info("Running handler")
    context.set_label("category", "tests")
    for model_name, file_name in model_names:
        context.log_artifact(model_name, body=param.encode(), local_path=file_name)

func = project.set_function("my-func", kind="job", image="mlrun/mlrun")
func.save()
task = new_task(name="mytask", handler=handler, artifact_path=artifact_path,
                params={"param": "x", "model_names": [["m1", "m1.txt"]]})
run_object = project.run_function("my-func", local=True, base_task=task)
assert run_object.state() == "completed"

"""new_task with a handler and parameters."""
import mlrun
from mlrun import new_task

def handler(context, param, model_names):
    context.logger.info("Running handler")
    context.set_label("category", "tests")
    for model_name, file_name in model_names:
        context.log_artifact(model_name, body=param.encode(), local_path=file_name)

task = new_task(name="mytask", handler=handler,
                params={"param": "x", "model_names": [["m1", "m1.txt"]]})
run = mlrun.new_function().run(task, local=True)
assert run.artifact("m1").get() == b"x"

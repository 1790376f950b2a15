"""code_to_function and a local run with a handler and params."""
import mlrun

open("trainer.py", "w").write(
    "def train(context, p1: int = 1):\n"
    "    context.log_result('accuracy', p1 * 2)\n"
)
fn = mlrun.code_to_function("trainer", filename="trainer.py", kind="job", image="mlrun/mlrun")
run = fn.run(handler="train", params={"p1": 4}, local=True)
print(run.uid(), run.state(), run.outputs)
assert run.outputs["accuracy"] == 8

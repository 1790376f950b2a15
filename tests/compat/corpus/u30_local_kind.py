"""A function of kind local with a command file."""
import mlrun

open("job.py", "w").write("def handler(context, x: int = 1):\n    return x + 1\n")
fn = mlrun.new_function("local-job", kind="local", command="job.py")
run = fn.run(handler="handler", params={"x": 1})
assert run.outputs["return"] == 2

"""mlrun.run_function with a function object."""
import mlrun

def handler(context, x=1):
    return x * 3

fn = mlrun.new_function("triple", kind="job")
run = mlrun.run_function(fn, handler=handler, params={"x": 2}, local=True)
assert run.outputs["return"] == 6

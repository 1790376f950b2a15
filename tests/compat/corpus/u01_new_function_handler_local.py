"""A Python function as the handler of a local run."""
import mlrun

def handler(context, x=1):
    context.log_result("double", x * 2)
    return x + 1

run = mlrun.new_function().run(handler=handler, params={"x": 3}, local=True)
print(run.state(), run.outputs)
assert run.outputs["double"] == 6
assert run.outputs["return"] == 4

"""MLClientCtx as the context's type."""
import mlrun
from mlrun.execution import MLClientCtx

def handler(context: MLClientCtx, x: int = 1):
    context.log_result("x", x)

run = mlrun.new_function().run(handler=handler, params={"x": 2}, local=True)
assert run.outputs["x"] == 2

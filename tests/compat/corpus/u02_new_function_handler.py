"""A Python function as the handler, run without local=True."""
import mlrun

def handler(context, x=1):
    context.log_result("double", x * 2)

run = mlrun.new_function().run(handler=handler, params={"x": 5})
assert run.output("double") == 10

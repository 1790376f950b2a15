"""A handler that fails ends the run in error."""
import mlrun

def handler(context):
    raise ValueError("bad data")

try:
    run = mlrun.new_function().run(handler=handler, local=True)
    state = run.state()
except Exception as error:
    state = "error"
assert state == "error"

"""RunObject as a type."""
import mlrun
from mlrun.model import RunObject

def handler(context):
    return 1

run: RunObject = mlrun.new_function().run(handler=handler, local=True)
assert isinstance(run, RunObject)

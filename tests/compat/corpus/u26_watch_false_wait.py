"""watch=False and wait_for_completion."""
import mlrun

def handler(context):
    context.log_result("done", True)

run = mlrun.new_function().run(handler=handler, watch=False)
run.wait_for_completion()
assert run.state() == "completed"

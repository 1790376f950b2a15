"""Run object: show() and logs()."""
import mlrun

def handler(context):
    print("hello from the run")
    context.log_result("x", 1)

run = mlrun.new_function().run(handler=handler, local=True)
run.show()
run.logs(watch=False)

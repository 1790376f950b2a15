"""The run DB: listing runs."""
import mlrun

def handler(context):
    context.log_result("x", 1)

mlrun.new_function().run(handler=handler, local=True)
db = mlrun.get_run_db()
runs = db.list_runs()
print(len(runs))

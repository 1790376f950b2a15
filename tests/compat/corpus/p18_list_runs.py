"""Listing a project's runs."""
import mlrun

def handler(context):
    context.log_result("x", 1)

project = mlrun.get_or_create_project("listing", context="./")
project.run_function(mlrun.new_function("lister", kind="job"), handler=handler, local=True)
runs = project.list_runs()
print(len(runs))

"""Labels and get_param."""
import mlrun

def handler(context):
    context.set_label("category", "tests")
    context.log_result("p", context.get_param("p", "default"))

run = mlrun.new_function().run(handler=handler, params={"p": "given"}, local=True)
assert run.outputs["p"] == "given"

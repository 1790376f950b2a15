"""Run result object: uid(), state(), outputs, output(), artifact()."""
import mlrun

def handler(context):
    context.log_result("accuracy", 0.9)
    context.log_artifact("report", body="all good", local_path="report.txt")

run = mlrun.new_function().run(handler=handler, local=True)
print(run.uid(), run.state())
print(run.outputs)
print(run.output("accuracy"))
assert run.state() == "completed"
assert run.output("accuracy") == 0.9
assert run.artifact("report").get() == b"all good"

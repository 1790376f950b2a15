"""Managing job resources: requests and limits (SDK configuration)."""
import mlrun

open("train.py", "w").write("def train(context):\n    return 1\n")
fn = mlrun.code_to_function("training", filename="train.py", kind="job", handler="train")
fn.with_requests(mem="1G", cpu=1)
fn.with_limits(mem="2G", cpu=2, gpus=1)
print(fn.spec.resources)
assert fn.spec.resources["limits"]["memory"] == "2G"

"""Function storage: export to YAML and import it back."""
import mlrun

open("train.py", "w").write("def train(context):\n    return 1\n")
fn = mlrun.code_to_function("trainer", filename="train.py", kind="job", handler="train")
fn.with_limits(mem="2G", cpu=2)
fn.export("function.yaml")
again = mlrun.import_function("function.yaml")
assert again.spec.resources["limits"]["memory"] == "2G"

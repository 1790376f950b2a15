"""import_function with new_name and project."""
import mlrun

fn = mlrun.new_function("base", kind="job", image="mlrun/mlrun")
fn.export("function.yaml")
copy = mlrun.import_function("function.yaml", new_name="copy", project="other")
assert copy.metadata.name == "copy"

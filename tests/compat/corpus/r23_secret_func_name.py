"""Function names with underscores are normalised."""
import mlrun

open("secret_func.py", "w").write("def handler(context):\n    return 1\n")
fn = mlrun.code_to_function("secret_func", filename="secret_func.py", kind="job",
                            handler="handler")
print(fn.metadata.name)
assert fn.metadata.name == "secret-func"

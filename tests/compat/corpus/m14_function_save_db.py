"""Storing a function (fn.save)."""
import mlrun

open("trainer.py", "w").write("def train(context):\n    return 1\n")
fn = mlrun.code_to_function("trainer", project="saved", filename="trainer.py", handler="train")
uri = fn.save()
print(uri)

"""Pod priority for user jobs: SDK configuration."""
import mlrun
import os

open("train.py", "w").write("def my_training_function(context, dataset=None):\n    return 1\n")
train_fn = mlrun.code_to_function("training", filename="train.py", kind="job",
                                  handler="my_training_function")
train_fn.with_priority_class(name="high")
print(train_fn.spec.priority_class_name)
assert train_fn.spec.priority_class_name == "high"

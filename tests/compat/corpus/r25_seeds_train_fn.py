"""Preemption mode SDK example: configure and run the training function."""
import mlrun
import os

open("train.py", "w").write("def my_training_function(context, dataset=None):\n    return 1\n")
open("data.csv", "w").write("a,b\n1,2\n")
my_data = os.path.abspath("data.csv")
train_fn = mlrun.code_to_function("training", filename="train.py", kind="job",
                                  handler="my_training_function")
train_fn.with_preemption_mode(mode="prevent")
train_fn.run(inputs={"dataset": my_data})
